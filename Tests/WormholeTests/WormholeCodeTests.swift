import Testing
@testable import Wormhole

/// Codes users type, and hints peers send, within bounds.
struct WormholeCodeTests {
    @Test(arguments: ["7-guitarist-revenge", "123-a", "4-purple-sausages-extra-words"])
    func validCodes(_ text: String) throws {
        let code = try WormholeCode(parsing: text)
        #expect(code.description == text)
    }

    @Test(arguments: ["", "7", "-a-b", "x-a-b", "7--b", "7-a b-c", "٣-a-b", String(repeating: "1", count: 300) + "-a"])
    func invalidCodes(_ text: String) {
        #expect(throws: WormholeError.self) { try WormholeCode(parsing: text) }
    }

    @Test func randomCodesAlternateOddAndEvenWords() throws {
        for _ in 0..<50 {
            let code = WormholeCode.random(nameplate: "12", count: 3)
            #expect(code.nameplate == "12")
            #expect(PGPWordList.odd.contains(code.words[0]) && PGPWordList.even.contains(code.words[1]) && PGPWordList.odd.contains(code.words[2]))
            #expect(try WormholeCode(parsing: code.description) == code)
        }
        #expect(PGPWordList.even.count == 256 && PGPWordList.odd.count == 256 && Set(PGPWordList.even + PGPWordList.odd).count == 512)
    }

    @Test func hintsAreBoundedAndMalformedOnesSkipped() {
        let many = (0..<1000).map { ["type": "direct-tcp-v1", "hostname": "10.0.0.\($0 % 250)", "port": 1000 + $0] as [String: Any] }
        let bad: [Any] = [["type": "direct-tcp-v1", "hostname": "a b", "port": 1], ["type": "direct-tcp-v1", "hostname": "h", "port": 70000],
                          ["type": "relay-v1", "hints": [["type": "direct-tcp-v1", "hostname": "relay", "port": 4001]]], "junk"]
        let hints = TransitHints(message: ["hints-v1": bad + many])
        #expect(hints.direct.count == TransitHints.maxHints)
        #expect(hints.direct.first == TransitHints.Address(host: "10.0.0.0", port: 1000))
        #expect(hints.relays == [TransitHints.Address(host: "relay", port: 4001)])
        #expect(TransitHints(message: hints.message) == hints)
    }

    @Test(arguments: [("report.pdf", true), ("..", false), (".", false), ("a/b", false), ("/etc", false), ("", false),
                      ("bell\u{7}", false), (String(repeating: "x", count: 256), false), ("Grüße.txt", true)])
    func offeredNames(_ name: String, _ safe: Bool) {
        #expect((WormholeFileReceiver.safeName(name) != nil) == safe)
    }
}

import Foundation
import Testing

/// `send --code` and `receive CODE` under `--json`: every line on standard output is a JSON
/// object docs/JSON.md documents (the `wormhole_code` event, `transfer` events, the text
/// result), and the last says what the user checks: completed, every byte, where it went.
@Suite(.serialized)
struct WormholeJSONTests {
    let contract = try! JSONContractTests()

    /// The code from the `wormhole_code` event on standard output, waiting up to 30 s.
    func code(_ sender: WormholeFixture.Background) throws -> String {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let match = sender.stdout.firstMatch(of: /"code":"(\d+-[a-z0-9-]+)"/) { return String(match.1) }
            guard sender.process.isRunning else { break }
            usleep(50_000)
        }
        throw WormholeFixture.Failure(description: "no wormhole_code event: \(sender.stdout) \(sender.stderr)")
    }

    func objects(_ command: String, _ process: WormholeFixture.Background) -> [[String: Any]] {
        contract.check(command, SyncpeerRunner.Result(status: process.wait(), stdout: process.stdout, stderr: process.stderr))
    }

    @Test func fileAndTextBetweenSyncpeersAsJSON() throws {
        guard WormholeFixture.available else {
            Issue.record(Comment(rawValue: WormholeFixture.missingReason))
            return
        }
        let f = try WormholeFixture(namespace: TestNetns.available)
        defer { f.stop() }
        let source = try f.directory("source"), inbox = try f.directory("inbox")
        let original = try #require(FileHandle(forReadingAtPath: "/dev/urandom")).readData(ofLength: 2_000_000)
        try original.write(to: URL(fileURLWithPath: source + "/data.bin"))

        let sender = try f.syncpeer(["send", source + "/data.bin", "--code", "--json"] + f.syncpeerServers)
        let receiver = try f.syncpeer(["receive", try code(sender), "--dir", inbox, "--json"] + f.syncpeerServers)
        let received = objects("command receive CODE", receiver)
        let sent = objects("command send --code", sender)
        #expect(sent.first?["event"] as? String == "wormhole_code", "\(sent)")
        for (lines, direction) in [(sent, "send"), (received, "receive")] {
            let last = try #require(lines.last)
            #expect(last["event"] as? String == "transfer" && last["direction"] as? String == direction, "\(last)")
            #expect(last["state"] as? String == "completed" && last["name"] as? String == "data.bin", "\(last)")
            #expect((last["bytes"] as? NSNumber)?.intValue == original.count && (last["total"] as? NSNumber)?.intValue == original.count, "\(last)")
        }
        #expect(received.last?["path"] as? String == inbox + "/data.bin", "\(received)")
        #expect(FileManager.default.contents(atPath: inbox + "/data.bin") == original)
        #expect(!sender.stderr.contains("Wormhole code is"), "under --json the code is an event: \(sender.stderr)")

        let textSender = try f.syncpeer(["send", "--code", "--text", "see you at 8", "--json"] + f.syncpeerServers)
        let textReceiver = try f.syncpeer(["receive", try code(textSender), "--json"] + f.syncpeerServers)
        #expect(objects("command receive CODE", textReceiver).last?["text"] as? String == "see you at 8")
        #expect(objects("command send --code", textSender).last?["text"] as? String == "see you at 8")
    }
}

import Testing
import PeerCrypto

struct DeviceIDTests {
    static let keys: [KeyPair] = (0..<20).map { _ in KeyPair.generate() }

    @Test func formatIsEightGroupsOfSeven() throws {
        let id = DeviceID(publicKey: Self.keys[0].publicKey)
        let groups = id.description.split(separator: "-")
        #expect(groups.count == 8)
        #expect(groups.allSatisfy { $0.count == 7 })
        #expect(id.description.allSatisfy { "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567-".contains($0) })
        #expect(id.shortID == String(groups[0]))
        #expect(id.compact.count == 56)
    }

    @Test(arguments: keys)
    func roundTripInEveryAcceptedSpelling(_ key: KeyPair) throws {
        let id = DeviceID(publicKey: key.publicKey)
        #expect(id.hash == BLAKE2b.hash(key.publicKey.bytes, length: 32))
        let spellings = [
            id.description,
            id.description.lowercased(),
            id.compact,
            id.description.replacing("-", with: " "),
            " " + id.compact.lowercased() + " ",
        ]
        for text in spellings {
            #expect(try DeviceID(parsing: text) == id, "spelling: \(text)")
        }
    }

    /// Every single-character substitution in every position is rejected.
    @Test(arguments: keys.prefix(5))
    func everySingleTypoIsCaught(_ key: KeyPair) {
        let text = Array(DeviceID(publicKey: key.publicKey).compact)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var tried = 0
        for i in text.indices {
            for c in alphabet where c != text[i] {
                var typo = text
                typo[i] = c
                #expect(throws: CryptoError.self) { try DeviceID(parsing: String(typo)) }
                tried += 1
            }
        }
        #expect(tried == 56 * 31)
    }

    /// Swapping two different neighbours within a group is caught (Luhn mod N misses
    /// only rare pairs; we require at least 95 % and report the figure).
    @Test func adjacentSwapsAreMostlyCaught() {
        var caught = 0
        var total = 0
        for key in Self.keys {
            let text = Array(DeviceID(publicKey: key.publicKey).compact)
            for i in 0..<(text.count - 1) where text[i] != text[i + 1] {
                var swapped = text
                swapped.swapAt(i, i + 1)
                total += 1
                if (try? DeviceID(parsing: String(swapped))) == nil { caught += 1 }
            }
        }
        #expect(Double(caught) / Double(total) >= 0.95, "caught \(caught) of \(total) swaps")
    }

    struct BadInput: Sendable, CustomTestStringConvertible {
        let text: String
        let reason: String
        var testDescription: String { reason }
    }

    @Test(arguments: [
        BadInput(text: "", reason: "expected 56 characters"),
        BadInput(text: "ABCDEFG", reason: "expected 56 characters"),
        BadInput(text: String(repeating: "A", count: 57), reason: "expected 56 characters"),
        BadInput(text: String(repeating: "A", count: 55) + "1", reason: "is not a device ID character"),
        BadInput(text: String(repeating: "A", count: 55) + "é", reason: "is not a device ID character"),
        BadInput(text: String(repeating: "A", count: 55) + "\u{0}", reason: "is not a device ID character"),
    ])
    func malformedIsRejectedWithReason(_ input: BadInput) {
        do {
            _ = try DeviceID(parsing: input.text)
            Issue.record("accepted \(input.text)")
        } catch {
            #expect(error.description.contains(input.reason), "\(error)")
        }
    }

    @Test func wrongCheckCharacterSaysMistyped() throws {
        var text = Array(DeviceID(publicKey: Self.keys[1].publicKey).compact)
        text[3] = text[3] == "A" ? "B" : "A"
        #expect {
            try DeviceID(parsing: String(text))
        } throws: { error in
            "\(error)".contains("mistyped")
        }
    }
}

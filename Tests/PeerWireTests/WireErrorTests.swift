import PeerWire
import Testing

@Suite struct WireErrorTests {
    static let errors: [WireError] = [
        .messageTooLarge(length: 70_000, limit: 65_535),
        .unknownFrameType(0x0A),
        .frameTooLarge(type: .message, length: 65_549, limit: 65_548),
        .frameTooShort(type: .ping, length: 7, minimum: 8),
        .truncated(field: "message body"),
        .trailingBytes(after: "hello", count: 1),
        .trailingBytes(after: "ping frame", count: 3),
        .invalidUTF8(field: "stream name"),
        .controlCharacter(field: "display name"),
        .fieldTooLong(field: "display name", length: 64, limit: 63),
        .fieldTooShort(field: "display name", length: 0, minimum: 1),
        .fieldTooShort(field: "x", length: 1, minimum: 2),
        .tooManyEntries(field: "feature list", count: 17, limit: 16),
        .invalidValue(field: "pairing status", value: 9),
        .badMagic,
        .helloTooLarge(length: 60_001, limit: 60_000),
    ]

    @Test(arguments: errors)
    func descriptionIsOneClearSentence(error: WireError) {
        let text = error.description
        #expect(text.first?.isUppercase == true || text.first?.isNumber == true)
        #expect(text.hasSuffix("."))
        #expect(!text.contains("\n"))
        #expect(text.count < 160)
    }

    @Test func descriptionsCarryTheirContext() {
        #expect(WireError.unknownFrameType(0x0A).description.contains("0x0A"))
        #expect(WireError.frameTooLarge(type: .message, length: 65_549, limit: 65_548).description
            == "A message frame announced a body of 65549 bytes, more than the 65548 bytes allowed for that frame type.")
        #expect(WireError.fieldTooShort(field: "display name", length: 0, minimum: 1).description
            == "The display name must not be empty.")
        #expect(WireError.trailingBytes(after: "hello", count: 1).description == "1 unexpected byte followed the hello.")
    }
}

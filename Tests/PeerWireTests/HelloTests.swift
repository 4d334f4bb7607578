import PeerWire
import Testing

/// Writes a hello by hand (not with the module's encoder), so that tests can build invalid ones.
func helloBytes(
    magic: [UInt8] = Array("SPH1".utf8), version: Int = 4, name: [UInt8] = Array("Ann".utf8),
    software: [UInt8] = Array("syncpeer 0.1".utf8), features: [[UInt8]] = [],
    featureCount: Int? = nil, contextFlag: Int = 0, context: [UInt8] = [],
    portFlag: Int = 0, port: Int = 0, trailing: [UInt8] = []
) -> [UInt8] {
    var b = Bytes()
    b.raw(magic)
    b.u16(version)
    b.u8(name.count); b.raw(name)
    b.u8(software.count); b.raw(software)
    b.u8(featureCount ?? features.count)
    for feature in features { b.u8(feature.count); b.raw(feature) }
    b.u8(contextFlag)
    if contextFlag == 1 { b.u16(context.count); b.raw(context) }
    b.u8(portFlag)
    if portFlag == 1 { b.u16(port) }
    b.raw(trailing)
    return b.bytes
}

struct HelloCase: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var error: WireError
    var testDescription: String { name }
}

@Suite struct HelloTests {
    @Test func knownAnswer() throws {
        let hello = Hello(displayName: "Ann", softwareVersion: "sp 0.1", features: ["x"], context: "hi",
                          listenPort: 22_000)
        let expected: [UInt8] = [0x53, 0x50, 0x48, 0x31,  // "SPH1"
                                 0x00, 0x04,  // protocol version 4
                                 3, 0x41, 0x6E, 0x6E,  // "Ann"
                                 6, 0x73, 0x70, 0x20, 0x30, 0x2E, 0x31,  // "sp 0.1"
                                 1, 1, 0x78,  // ["x"]
                                 1, 0x00, 0x02, 0x68, 0x69,  // context "hi"
                                 1, 0x55, 0xF0]  // listen port 22,000
        #expect(hello.encode() == expected)
        #expect(try Hello.decode(expected) == hello)
        #expect(helloBytes(name: Array("Ann".utf8), software: Array("sp 0.1".utf8), features: [[0x78]],
                           contextFlag: 1, context: [0x68, 0x69], portFlag: 1, port: 22_000) == expected)
    }

    @Test func knownAnswerWithoutContextOrPort() throws {
        let hello = Hello(displayName: "B", softwareVersion: "")
        let expected: [UInt8] = [0x53, 0x50, 0x48, 0x31, 0x00, 0x04, 1, 0x42, 0, 0,
                                 0,  // no context
                                 0]  // no listen port
        #expect(hello.encode() == expected)
        #expect(try Hello.decode(expected) == hello)
    }

    @Test func listenPortRoundTrips() throws {
        for port: UInt16? in [nil, 1, 443, 22_000, .max] {
            let hello = Hello(displayName: "a", softwareVersion: "b", listenPort: port)
            #expect(try Hello.decode(hello.encode()).listenPort == port)
        }
    }

    static let valid: [Hello] = [
        Hello(displayName: "A", softwareVersion: ""),
        Hello(protocolVersion: .max, displayName: "Laptop de Zoé", softwareVersion: "syncpeer 1.2.3",
              features: ["resources", "folder-sync"], context: "shared folder “Photos”\nfrom Zoé\t✓"),
        Hello(displayName: String(repeating: "n", count: 63), softwareVersion: String(repeating: "v", count: 64),
              features: (0..<16).map { String(repeating: Character(String($0, radix: 16)), count: 32) },
              context: String(repeating: "c", count: 1_024), listenPort: .max),
        Hello(displayName: String(repeating: "é", count: 31), softwareVersion: "x", context: "", listenPort: 1),  // 62 bytes
        Hello(displayName: String(repeating: "🦊", count: 15) + "abc", softwareVersion: "x"),  // 63 bytes
    ]

    @Test(arguments: valid)
    func roundTrip(hello: Hello) throws {
        try hello.validate()
        let bytes = hello.encode()
        #expect(bytes.count <= WireLimits.maxHello)
        #expect(try Hello.decode(bytes) == hello)
        #expect(try Hello.decode(bytes[...]) == hello, "any collection of bytes decodes")
    }

    @Test func emptyContextIsNotNoContext() throws {
        let none = Hello(displayName: "a", softwareVersion: "b", context: nil)
        let empty = Hello(displayName: "a", softwareVersion: "b", context: "")
        #expect(none.encode() != empty.encode())
        #expect(try Hello.decode(empty.encode()).context == "")
        #expect(try Hello.decode(none.encode()).context == nil)
    }

    static let invalid: [HelloCase] = [
        HelloCase(name: "64-byte name", bytes: helloBytes(name: Array(repeating: 0x6E, count: 64)),
                  error: .fieldTooLong(field: "display name", length: 64, limit: 63)),
        HelloCase(name: "32 × é is 64 bytes", bytes: helloBytes(name: Array(String(repeating: "é", count: 32).utf8)),
                  error: .fieldTooLong(field: "display name", length: 64, limit: 63)),
        HelloCase(name: "empty name", bytes: helloBytes(name: []),
                  error: .fieldTooShort(field: "display name", length: 0, minimum: 1)),
        HelloCase(name: "name with escape", bytes: helloBytes(name: [0x41, 0x1B, 0x5B, 0x31, 0x6D]),
                  error: .controlCharacter(field: "display name")),
        HelloCase(name: "name with newline", bytes: helloBytes(name: [0x41, 0x0A, 0x42]),
                  error: .controlCharacter(field: "display name")),
        HelloCase(name: "name bad UTF-8", bytes: helloBytes(name: [0x41, 0xFF]),
                  error: .invalidUTF8(field: "display name")),
        HelloCase(name: "65-byte software", bytes: helloBytes(software: pattern(65).map { _ in 0x76 }),
                  error: .fieldTooLong(field: "software version", length: 65, limit: 64)),
        HelloCase(name: "17 features", bytes: helloBytes(features: Array(repeating: [0x66], count: 17)),
                  error: .tooManyEntries(field: "feature list", count: 17, limit: 16)),
        HelloCase(name: "255 features announced", bytes: helloBytes(featureCount: 255),
                  error: .tooManyEntries(field: "feature list", count: 255, limit: 16)),
        HelloCase(name: "33-byte feature", bytes: helloBytes(features: [Array(repeating: 0x66, count: 33)]),
                  error: .fieldTooLong(field: "feature name", length: 33, limit: 32)),
        HelloCase(name: "empty feature", bytes: helloBytes(features: [[]]),
                  error: .fieldTooShort(field: "feature name", length: 0, minimum: 1)),
        HelloCase(name: "features cut short", bytes: Array(helloBytes(featureCount: 2).dropLast(2)),
                  error: .truncated(field: "feature name length")),
        HelloCase(name: "1025-byte context", bytes: helloBytes(contextFlag: 1, context: Array(repeating: 0x63, count: 1_025)),
                  error: .fieldTooLong(field: "invitation context", length: 1_025, limit: 1_024)),
        HelloCase(name: "context with escape", bytes: helloBytes(contextFlag: 1, context: [0x1B]),
                  error: .controlCharacter(field: "invitation context")),
        HelloCase(name: "context flag 2", bytes: helloBytes(contextFlag: 2),
                  error: .invalidValue(field: "context flag", value: 2)),
        HelloCase(name: "missing context flag", bytes: Array(helloBytes().dropLast(2)),
                  error: .truncated(field: "context flag")),
        HelloCase(name: "missing listen port flag", bytes: Array(helloBytes().dropLast()),
                  error: .truncated(field: "listen port flag")),
        HelloCase(name: "listen port flag 2", bytes: helloBytes(portFlag: 2),
                  error: .invalidValue(field: "listen port flag", value: 2)),
        HelloCase(name: "listen port cut short", bytes: Array(helloBytes(portFlag: 1, port: 80).dropLast()),
                  error: .truncated(field: "listen port")),
        HelloCase(name: "listen port 0", bytes: helloBytes(portFlag: 1, port: 0),
                  error: .invalidValue(field: "listen port", value: 0)),
        HelloCase(name: "trailing byte", bytes: helloBytes(trailing: [0]),
                  error: .trailingBytes(after: "hello", count: 1)),
        HelloCase(name: "bad magic", bytes: helloBytes(magic: Array("SPH2".utf8)), error: .badMagic),
        HelloCase(name: "empty payload", bytes: [], error: .badMagic),
        HelloCase(name: "three bytes", bytes: [0x53, 0x50, 0x48], error: .badMagic),
        HelloCase(name: "a frame, not a hello", bytes: FrameEncoder.encode(.ping(1)), error: .badMagic),
        HelloCase(name: "over 60,000 bytes", bytes: helloBytes(trailing: Array(repeating: 0, count: 60_000)),
                  error: .helloTooLarge(length: helloBytes().count + 60_000, limit: 60_000)),
    ]

    @Test(arguments: invalid)
    func invalidHelloIsRejected(input: HelloCase) {
        #expect(throws: input.error) { try Hello.decode(input.bytes) }
    }

    @Test(arguments: [
        (Hello(displayName: String(repeating: "n", count: 64), softwareVersion: ""),
         .fieldTooLong(field: "display name", length: 64, limit: 63)),
        (Hello(displayName: String(repeating: "🦊", count: 16), softwareVersion: ""),
         .fieldTooLong(field: "display name", length: 64, limit: 63)),
        (Hello(displayName: "", softwareVersion: ""), .fieldTooShort(field: "display name", length: 0, minimum: 1)),
        (Hello(displayName: "a", softwareVersion: "", features: Array(repeating: "f", count: 17)),
         .tooManyEntries(field: "feature list", count: 17, limit: 16)),
        (Hello(displayName: "a", softwareVersion: "", context: String(repeating: "é", count: 513)),
         .fieldTooLong(field: "invitation context", length: 1_026, limit: 1_024)),
        (Hello(displayName: "a", softwareVersion: "", listenPort: 0), .invalidValue(field: "listen port", value: 0)),
    ] as [(Hello, WireError)])
    func validateRejectsOverLimitHello(hello: Hello, expected: WireError) {
        #expect(throws: expected) { try hello.validate() }
    }

    @Test func everyStrictPrefixIsRejected() {
        for hello in Self.valid {
            let bytes = hello.encode()
            for length in 0..<bytes.count {
                #expect(throws: WireError.self) { try Hello.decode(bytes[..<length]) }
            }
        }
    }
}

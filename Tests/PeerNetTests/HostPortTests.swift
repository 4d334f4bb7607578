import PeerNet
import Testing

struct HostPortCase: Sendable, CustomTestStringConvertible {
    var text: String
    /// The parsed value, or nil when parsing must fail.
    var expected: HostPort?
    /// For failures: a fragment the message must contain.
    var message: String = ""
    var testDescription: String { "\"\(text)\"" }
}

@Suite struct HostPortTests {
    static let valid: [HostPortCase] = [
        HostPortCase(text: "[::1]:22", expected: HostPort(host: "::1", port: 22)),
        HostPortCase(text: "127.0.0.1:0", expected: HostPort(host: "127.0.0.1", port: 0)),
        HostPortCase(text: "localhost:8080", expected: HostPort(host: "localhost", port: 8080)),
        HostPortCase(text: "192.0.2.7:65535", expected: HostPort(host: "192.0.2.7", port: 65535)),
        HostPortCase(text: "[fe80::1%lo]:22000", expected: HostPort(host: "fe80::1%lo", port: 22000)),
        HostPortCase(text: "host.example:007", expected: HostPort(host: "host.example", port: 7)),
    ]

    static let invalid: [HostPortCase] = [
        HostPortCase(text: "a", message: "missing port in \"a\""),
        HostPortCase(text: "a:", message: "missing port in \"a:\""),
        HostPortCase(text: ":1", message: "empty host in \":1\""),
        HostPortCase(text: "a:70000", message: "port 70000 in \"a:70000\" is out of range"),
        HostPortCase(text: "a:123456", message: "out of range"),
        HostPortCase(text: "a:-1", message: "port \"-1\" in \"a:-1\" is not a number"),
        HostPortCase(text: "a:1x", message: "is not a number"),
        HostPortCase(text: "", message: "empty address"),
        HostPortCase(text: "a b:1", message: "contains spaces"),
        HostPortCase(text: "::1:22", message: "needs brackets"),
        HostPortCase(text: "[::1]", message: "missing port in \"[::1]\""),
        HostPortCase(text: "[::1]:", message: "missing port"),
        HostPortCase(text: "[::1:22", message: "no closing ']'"),
        HostPortCase(text: "[]:22", message: "empty host"),
        HostPortCase(text: "a]:22", message: "misplaced bracket"),
    ]

    @Test(arguments: valid)
    func parses(example: HostPortCase) throws {
        let parsed = try HostPort(parsing: example.text)
        #expect(parsed == example.expected)
    }

    @Test(arguments: invalid)
    func refuses(example: HostPortCase) {
        let error = netError { try HostPort(parsing: example.text) }
        guard case let .invalidAddress(message) = error else {
            Issue.record("expected invalidAddress, got \(String(describing: error))")
            return
        }
        #expect(message.contains(example.message), "\(message)")
    }

    @Test func descriptionBracketsIPv6AndRoundTrips() throws {
        #expect(HostPort(host: "::1", port: 22).description == "[::1]:22")
        #expect(HostPort(host: "127.0.0.1", port: 22000).description == "127.0.0.1:22000")
        for example in Self.valid where example.text != "host.example:007" {
            #expect(try HostPort(parsing: example.text).description == example.text)
        }
    }
}

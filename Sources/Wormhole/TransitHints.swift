/// Transit connection hints, as the `transit` message carries them (magic-wormhole
/// docs/transit.md): direct TCP addresses of the peer, and relays that both sides can reach.
///
///     {"abilities-v1": [{"type": "direct-tcp-v1"}, {"type": "relay-v1"}],
///      "hints-v1": [{"type": "direct-tcp-v1", "hostname": H, "port": P, "priority": 0.0},
///                   {"type": "relay-v1", "hints": [{"type": "direct-tcp-v1", "hostname": H, "port": P}]}]}
package struct TransitHints: Sendable, Equatable {
    /// Hints read from one message, at most this many of each kind (the rest are ignored).
    package static let maxHints = 16

    package struct Address: Sendable, Hashable {
        package let host: String
        package let port: UInt16

        package init(host: String, port: UInt16) {
            self.host = host
            self.port = port
        }
    }

    package var direct: [Address] = []
    package var relays: [Address] = []

    package init(direct: [Address] = [], relays: [Address] = []) {
        self.direct = direct
        self.relays = relays
    }

    /// Reads the peer's hints; malformed entries are skipped, counts and names bounded.
    package init(message: [String: Any]) {
        for hint in (message["hints-v1"] as? [Any] ?? []).prefix(4 * Self.maxHints) {
            guard let hint = hint as? [String: Any] else { continue }
            switch hint["type"] as? String {
            case "direct-tcp-v1":
                if direct.count < Self.maxHints, let address = Self.address(hint) { direct.append(address) }
            case "relay-v1":
                for inner in (hint["hints"] as? [Any] ?? []).prefix(Self.maxHints) {
                    if relays.count < Self.maxHints, let inner = inner as? [String: Any], let address = Self.address(inner) {
                        relays.append(address)
                    }
                }
            default: continue
            }
        }
    }

    private static func address(_ hint: [String: Any]) -> Address? {
        guard let host = hint["hostname"] as? String, !host.isEmpty, host.utf8.count <= 255,
              host.allSatisfy({ $0.isASCII && !$0.isWhitespace }),
              let port = hint["port"] as? Int, let p = UInt16(exactly: port), p != 0
        else { return nil }
        return Address(host: host, port: p)
    }

    /// The `transit` message body for these hints.
    package var message: [String: Any] {
        var hints: [[String: Any]] = direct.map { ["type": "direct-tcp-v1", "hostname": $0.host, "port": Int($0.port), "priority": 0.0] }
        if !relays.isEmpty {
            hints.append(["type": "relay-v1", "hints": relays.map { ["type": "direct-tcp-v1", "hostname": $0.host, "port": Int($0.port), "priority": 0.0] }])
        }
        return ["abilities-v1": [["type": "direct-tcp-v1"], ["type": "relay-v1"]], "hints-v1": hints]
    }
}


/// Resolves what a user typed as PEER — a display name, a device ID or a unique prefix of
/// one, or HOST:PORT — against the peers the node knows. Pure; tested by tables.
public enum PeerResolver {
    /// A peer the node knows (paired or connected).
    public struct Candidate: Sendable, Equatable {
        public let deviceID: String
        public let name: String
        public let addresses: [String]
        public init(deviceID: String, name: String, addresses: [String]) {
            self.deviceID = deviceID
            self.name = name
            self.addresses = addresses
        }
    }

    public enum Resolution: Sendable, Equatable {
        case peer(Candidate)
        /// HOST:PORT that matches no known peer.
        case address(String)
    }

    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        case unknown(String)
        case ambiguous(String, [Candidate])

        public var description: String {
            switch self {
            case let .unknown(text):
                return "no known peer matches '\(text)'; see 'syncpeer peers' (pair first with 'syncpeer pair HOST:PORT')"
            case let .ambiguous(text, candidates):
                let list = candidates.map { "\($0.name) (\($0.deviceID.prefix(7)))" }.joined(separator: ", ")
                return "'\(text)' matches \(candidates.count) peers: \(list); use a device ID (or a longer prefix) instead"
            }
        }
    }

    public static func resolve(_ text: String, among candidates: [Candidate]) throws(Failure) -> Resolution {
        let trimmed = text.trimmingSpaces()
        // Exact name first: names are what people type most.
        let byName = candidates.filter { $0.name == trimmed }
        if byName.count == 1 { return .peer(byName[0]) }
        if byName.count > 1 { throw .ambiguous(trimmed, byName) }
        // Device ID or a prefix of one (dashes, spaces and case ignored), at least 4 characters.
        let compact = trimmed.uppercased().filter { $0 != "-" && $0 != " " }
        if compact.count >= 4, compact.allSatisfy({ $0.isLetter || $0.isNumber }) {
            let byID = candidates.filter { $0.deviceID.filter { $0 != "-" }.hasPrefix(compact) }
            if byID.count == 1 { return .peer(byID[0]) }
            if byID.count > 1 { throw .ambiguous(trimmed, byID) }
        }
        // HOST:PORT: a known peer's address, or a new one.
        if let colon = trimmed.lastIndex(of: ":"), UInt16(trimmed[trimmed.index(after: colon)...]) != nil {
            let byAddress = candidates.filter { $0.addresses.contains(trimmed) }
            if byAddress.count == 1 { return .peer(byAddress[0]) }
            return .address(trimmed)
        }
        throw .unknown(trimmed)
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}

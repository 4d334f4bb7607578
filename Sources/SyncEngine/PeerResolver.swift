internal import PeerCrypto

/// Resolves what a user typed as PEER — a display name, a device ID or a unique prefix of
/// one, or HOST:PORT — against the peers the node knows. Pure; tested by tables.
package enum PeerResolver {
    /// A peer the node knows (paired or connected).
    package struct Candidate: Sendable, Equatable {
        package let deviceID: String
        package let name: String
        package let addresses: [String]
        package init(deviceID: String, name: String, addresses: [String]) {
            self.deviceID = deviceID
            self.name = name
            self.addresses = addresses
        }
    }

    package enum Resolution: Sendable, Equatable {
        case peer(Candidate)
        /// HOST:PORT that matches no known peer.
        case address(String)
    }

    package enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        case unknown(String)
        case ambiguous(String, [Candidate])
        /// A typo of a known name: "did you mean bob?".
        case didYouMean(String, [String])
        /// A node discovery sees nearby, not paired.
        case nearbyNotPaired(String)
        /// A whole device ID whose check characters do not match (or that is malformed).
        case badDeviceID(String, reason: String)

        package var description: String {
            switch self {
            case let .unknown(text):
                return "no known peer matches '\(text)'; see 'syncpeer peers' (pair first with 'syncpeer pair HOST:PORT')"
            case let .ambiguous(text, candidates):
                let list = candidates.map { "\($0.name) (\($0.deviceID.prefix(7)))" }.joined(separator: ", ")
                return "'\(text)' matches \(candidates.count) peers: \(list); use a device ID (or a longer prefix) instead"
            case let .didYouMean(text, names):
                let list = names.count == 1 ? names[0] : names.dropLast().joined(separator: ", ") + " or " + names.last!
                return "no peer is called '\(text)'; did you mean \(list)?"
            case let .nearbyNotPaired(name):
                return "\(name) is nearby but not paired: syncpeer pair \(name)"
            case let .badDeviceID(text, reason):
                return "'\(text)' is not a valid device ID: \(reason)"
            }
        }
    }

    /// `nearby`: names of nodes discovery sees that are not candidates (not paired).
    package static func resolve(_ text: String, among candidates: [Candidate], nearby: [String] = []) throws(Failure) -> Resolution {
        let trimmed = text.trimmingSpaces()
        // Exact name first: names are what people type most.
        let byName = candidates.filter { $0.name == trimmed }
        if byName.count == 1 { return .peer(byName[0]) }
        if byName.count > 1 { throw .ambiguous(trimmed, byName) }
        // The same name in another case, when only one peer has it.
        let folded = candidates.filter { $0.name.lowercased() == trimmed.lowercased() }
        if folded.count == 1 { return .peer(folded[0]) }
        if folded.count > 1 { throw .ambiguous(trimmed, folded) }
        // Device ID or a prefix of one (dashes, spaces and case ignored), at least 4 characters.
        let compact = trimmed.uppercased().filter { $0 != "-" && $0 != " " }
        if compact.count >= 4, compact.allSatisfy({ $0.isLetter || $0.isNumber }) {
            let byID = candidates.filter { $0.deviceID.filter { $0 != "-" }.hasPrefix(compact) }
            if byID.count == 1 { return .peer(byID[0]) }
            if byID.count > 1 { throw .ambiguous(trimmed, byID) }
            // A whole device ID (56 characters, 8 groups of 7) that matches no peer: check it, so a typo
            // says so instead of "no known peer".
            if compact.count == 56 {
                do throws(CryptoError) { _ = try DeviceID(parsing: compact) } catch {
                    if case let .invalidDeviceID(why) = error { throw .badDeviceID(trimmed, reason: why) }
                    throw .badDeviceID(trimmed, reason: error.description)
                }
            }
        }
        // HOST:PORT: a known peer's address, or a new one.
        if let colon = trimmed.lastIndex(of: ":"), UInt16(trimmed[trimmed.index(after: colon)...]) != nil {
            let byAddress = candidates.filter { $0.addresses.contains(trimmed) }
            if byAddress.count == 1 { return .peer(byAddress[0]) }
            return .address(trimmed)
        }
        if let near = nearby.first(where: { $0.lowercased() == trimmed.lowercased() }) {
            throw .nearbyNotPaired(near)
        }
        let suggestions = suggest(trimmed, among: candidates.map(\.name) + nearby)
        if !suggestions.isEmpty { throw .didYouMean(trimmed, suggestions) }
        throw .unknown(trimmed)
    }

    /// Names within a small edit distance of `text` (case ignored): at most 1 edit for a
    /// name of up to 4 characters, 2 for longer ones; the closest first.
    package static func suggest(_ text: String, among names: [String]) -> [String] {
        let typed = Array(text.lowercased())
        let limit = typed.count <= 4 ? 1 : 2
        var scored: [(String, Int)] = []
        var seen = Set<String>()
        for name in names where seen.insert(name).inserted {
            let distance = editDistance(typed, Array(name.lowercased()))
            if distance <= limit { scored.append((name, distance)) }
        }
        return scored.sorted { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }.map(\.0)
    }

    /// Levenshtein distance with adjacent transpositions counted as one edit ("bbo" → "bob").
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
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

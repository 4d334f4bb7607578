/// How long a folder keeps the versions it replaced (`share DIR --versions POLICY`,
/// `syncpeer versions DIR POLICY`), as text:
///
///     none                 keep nothing
///     trashcan DAYS        keep each version DAYS days
///     simple N             keep the N newest versions of each path
///     staggered [DAYS]     one per 30 s for the first hour, one per hour for a day, one per day
///                          for 30 days, one per week up to DAYS (default 30) days
///
/// each optionally followed by `cap SIZE` (bytes with K, M, G or T, or a share of the file
/// system holding the node's home, `10%`): the store's bytes above it go, oldest first. The
/// default is `staggered 30 cap 10%`. Pure logic: `expired` takes the clock as an argument.
package struct VersionPolicy: Sendable, Equatable, CustomStringConvertible {
    package enum Kind: Sendable, Equatable {
        case none
        case trashcan(days: Int)
        case simple(count: Int)
        case staggered(maxDays: Int)
    }

    package enum Cap: Sendable, Equatable {
        case bytes(Int64)
        /// Percent of the file system's size.
        case percent(Int)
    }

    package var kind: Kind
    package var cap: Cap?

    package init(kind: Kind, cap: Cap? = nil) {
        self.kind = kind
        self.cap = cap
    }

    /// A new share's policy.
    package static let standard = VersionPolicy(kind: .staggered(maxDays: 30), cap: .percent(10))

    /// Largest number a policy takes (days, versions): no overflow in the arithmetic below.
    static let maxNumber = 100_000

    /// Reads a policy's text; nil when it is not one.
    package init?(parsing text: String) {
        var words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        var cap: Cap?
        if words.count >= 2, words[words.count - 2] == "cap" {
            guard let parsed = Self.parseCap(words[words.count - 1]) else { return nil }
            cap = parsed
            words.removeLast(2)
        }
        func number(_ at: Int) -> Int? {
            guard at < words.count, let n = Int(words[at]), n > 0, n <= Self.maxNumber else { return nil }
            return n
        }
        switch words.first {
        case "none" where words.count == 1: self.init(kind: .none, cap: cap)
        case "trashcan" where words.count == 2:
            guard let days = number(1) else { return nil }
            self.init(kind: .trashcan(days: days), cap: cap)
        case "simple" where words.count == 2:
            guard let count = number(1) else { return nil }
            self.init(kind: .simple(count: count), cap: cap)
        case "staggered" where words.count <= 2:
            let days = words.count == 2 ? number(1) : 30
            guard let days else { return nil }
            self.init(kind: .staggered(maxDays: days), cap: cap)
        default: return nil
        }
    }

    private static func parseCap(_ text: String) -> Cap? {
        if text.hasSuffix("%") {
            guard let n = Int(text.dropLast()), n > 0, n <= 100 else { return nil }
            return .percent(n)
        }
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last?.uppercased().first, let scale = units[last] { (digits, unit) = (text.dropLast(), scale) }
        guard let n = Int64(digits), n > 0, n <= Int64.max / unit else { return nil }
        return .bytes(n * unit)
    }

    package var description: String {
        let base = switch kind {
        case .none: "none"
        case let .trashcan(days): "trashcan \(days)"
        case let .simple(count): "simple \(count)"
        case let .staggered(days): "staggered \(days)"
        }
        switch cap {
        case nil: return base
        case let .percent(n): return base + " cap \(n)%"
        case let .bytes(n):
            // In the largest unit that divides it, as it is typed ("cap 5G").
            for (unit, scale) in [("T", Int64(1) << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] where n % scale == 0 {
                return base + " cap \(n / scale)\(unit)"
            }
            return base + " cap \(n)"
        }
    }

    /// The cap in bytes on a file system of `fileSystemBytes` (nil: none).
    package func capBytes(fileSystemBytes: Int64) -> Int64? {
        switch cap {
        case nil: nil
        case let .bytes(n): n
        case let .percent(n): fileSystemBytes / 100 * Int64(n)
        }
    }

    /// One kept version as expiry sees it.
    package struct Kept: Sendable, Equatable {
        package var id: Int64
        package var path: String
        /// Unix ms.
        package var keptAt: Int64
        package init(id: Int64, path: String, keptAt: Int64) {
            (self.id, self.path, self.keptAt) = (id, path, keptAt)
        }
    }

    static let second: Int64 = 1_000, minute = 60 * second, hour = 60 * minute, day = 24 * hour, week = 7 * day

    /// The versions this policy no longer keeps at `now` (unix ms), before the cap.
    package func expired(_ versions: [Kept], now: Int64) -> Set<Int64> {
        switch kind {
        case .none:
            return Set(versions.map(\.id))
        case let .trashcan(days):
            return Set(versions.filter { now - $0.keptAt > Int64(days) * Self.day }.map(\.id))
        case let .simple(count):
            var out = Set<Int64>()
            for list in Self.byPathNewestFirst(versions) { out.formUnion(list.dropFirst(count).map(\.id)) }
            return out
        case let .staggered(maxDays):
            var out = Set<Int64>()
            for list in Self.byPathNewestFirst(versions) {
                var lastKept: Int64?
                for version in list {
                    let age = now - version.keptAt
                    if age > Int64(maxDays) * Self.day {
                        out.insert(version.id)
                        continue
                    }
                    let interval = age < Self.hour ? 30 * Self.second : age < Self.day ? Self.hour
                        : age < 30 * Self.day ? Self.day : Self.week
                    if let kept = lastKept, kept - version.keptAt < interval {
                        out.insert(version.id)
                    } else {
                        lastKept = version.keptAt
                    }
                }
            }
            return out
        }
    }

    /// Versions grouped by path, each group newest first (by time, then ID).
    private static func byPathNewestFirst(_ versions: [Kept]) -> [[Kept]] {
        Dictionary(grouping: versions, by: \.path).values.map { list in
            list.sorted { ($0.keptAt, $0.id) > ($1.keptAt, $1.id) }
        }
    }
}

/// The version of one path: for each device that changed it, how many changes (a counter
/// that only grows). Two versions are ordered when one has seen every change the other
/// has (dominance); otherwise they are concurrent, and the path is in conflict.
///
/// Counters of 0 are not stored (0 and absent mean the same), so equal vectors are equal
/// values. The JSON form is the index's (`files.version`): compact, keys in byte order.
package struct VersionVector: Sendable, Hashable, CustomStringConvertible, ExpressibleByDictionaryLiteral {
    /// How two versions relate.
    package enum Ordering: Sendable, Equatable {
        /// Same counters.
        case equal
        /// Self has seen everything the other has, and more.
        case greater
        /// The other has seen everything self has, and more.
        case lesser
        /// Each has changes the other has not seen: a conflict.
        case concurrent
    }

    /// Device key (device ID) → counter; never holds 0.
    package private(set) var counters: [String: UInt64]

    /// From counters; entries of 0 are dropped (without a copy when there is none: the
    /// index reads one vector per record).
    package init(_ counters: [String: UInt64] = [:]) {
        self.counters = counters.values.contains(0) ? counters.filter { $0.value != 0 } : counters
    }

    package init(dictionaryLiteral elements: (String, UInt64)...) {
        self.init(Dictionary(elements, uniquingKeysWith: { first, second in max(first, second) }))
    }

    /// The counter of `device` (0 when it never changed the path).
    package subscript(device: String) -> UInt64 { counters[device] ?? 0 }

    /// No device ever changed the path.
    package var isEmpty: Bool { counters.isEmpty }

    /// How many devices changed the path.
    package var count: Int { counters.count }

    /// How self relates to `other`.
    package func compare(_ other: VersionVector) -> Ordering {
        var selfAhead = false
        var otherAhead = false
        for (device, mine) in counters {
            let theirs = other[device]
            if mine > theirs { selfAhead = true } else if mine < theirs { otherAhead = true }
        }
        // Devices only the other has are ahead there (self's counter is 0).
        if !otherAhead, other.counters.keys.contains(where: { counters[$0] == nil }) { otherAhead = true }
        switch (selfAhead, otherAhead) {
        case (false, false): return .equal
        case (true, false): return .greater
        case (false, true): return .lesser
        case (true, true): return .concurrent
        }
    }

    /// Self has seen every change `other` has (greater or equal).
    package func dominates(_ other: VersionVector) -> Bool {
        let ordering = compare(other)
        return ordering == .greater || ordering == .equal
    }

    /// The element-wise maximum: a version that has seen both.
    package func merged(with other: VersionVector) -> VersionVector {
        var result = self
        for (device, theirs) in other.counters where theirs > result[device] {
            result.counters[device] = theirs
        }
        return result
    }

    /// The version after one more change by `device`: its counter becomes
    /// `max(counter + 1, minimum)`. Passing a clock (e.g. unix seconds) as `minimum` keeps
    /// counters growing even for a device that lost its index and starts over.
    package func incremented(for device: String, minimum: UInt64 = 0) -> VersionVector {
        var result = self
        let current = self[device]
        let next = current == UInt64.max ? current : max(current + 1, minimum)
        result.counters[device] = max(next, 1)
        return result
    }

    /// Compact JSON object with keys in byte order, as stored in the index.
    package var json: String { VersionJSON.encode(counters) }

    /// Parses the index's JSON form; nil when it is not an object of non-negative integers.
    package init?(json: String) {
        guard let counters = VersionJSON.decode(json) else { return nil }
        self.init(counters)
    }

    package var description: String {
        "{" + counters.sorted { $0.key < $1.key }.map { "\($0.key.prefix(7)):\($0.value)" }.joined(separator: ",") + "}"
    }
}

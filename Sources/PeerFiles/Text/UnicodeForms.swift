/// The Unicode normalization forms (UAX #15) in plain Swift: NFC, NFD, NFKC and NFKD.
///
/// Foundation's `precomposedStringWithCanonicalMapping` and its kin need ICU, whose data is
/// 34 of the release binary's 65 MB; the standard library compares strings by canonical
/// equivalence but offers no public way to get a normal form (issue 42.6). The
/// decompositions and composites come from `scripts/unicode-forms.py` (UnicodeForms+Data);
/// combining classes and composition exclusions from the standard library's scalar
/// properties; Hangul syllables by their algorithm.
package enum UnicodeForms {
    /// Canonical decomposition, then canonical composition.
    package static func nfc(_ text: String) -> String { text.utf8.allSatisfy { $0 < 0x80 } ? text : string(compose(decompose(text, compatibility: false))) }
    /// Canonical decomposition.
    package static func nfd(_ text: String) -> String { text.utf8.allSatisfy { $0 < 0x80 } ? text : string(decompose(text, compatibility: false)) }
    /// Compatibility decomposition, then canonical composition.
    package static func nfkc(_ text: String) -> String { text.utf8.allSatisfy { $0 < 0x80 } ? text : string(compose(decompose(text, compatibility: true))) }
    /// Compatibility decomposition.
    package static func nfkd(_ text: String) -> String { text.utf8.allSatisfy { $0 < 0x80 } ? text : string(decompose(text, compatibility: true)) }

    private static func string(_ scalars: [Unicode.Scalar]) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        return String(view)
    }

    private static func combiningClass(_ scalar: Unicode.Scalar) -> UInt8 {
        scalar.value < 0x300 ? 0 : scalar.properties.canonicalCombiningClass.rawValue
    }

    // MARK: Decomposition

    private static func decompose(_ text: String, compatibility: Bool) -> [Unicode.Scalar] {
        var out: [Unicode.Scalar] = []
        out.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if scalar.value < 0x80 {
                out.append(scalar)
            } else if let syllable = Hangul(scalar) {
                out += syllable.jamo
            } else if let mapped = (compatibility ? tables.compatibility[scalar.value] : nil) ?? tables.canonical[scalar.value] {
                out += mapped
            } else {
                out.append(scalar)
            }
        }
        reorder(&out)
        return out
    }

    /// Canonical ordering: each run of non-starters sorted by combining class, stably.
    private static func reorder(_ scalars: inout [Unicode.Scalar]) {
        var start = 0
        while start < scalars.count {
            guard combiningClass(scalars[start]) != 0 else { start += 1; continue }
            var end = start + 1
            while end < scalars.count, combiningClass(scalars[end]) != 0 { end += 1 }
            if end - start > 1 {
                let sorted = scalars[start..<end].enumerated()
                    .sorted { (combiningClass($0.element), $0.offset) < (combiningClass($1.element), $1.offset) }
                    .map(\.element)
                scalars.replaceSubrange(start..<end, with: sorted)
            }
            start = end
        }
    }

    // MARK: Composition

    /// Each scalar that is not blocked from the last starter and forms a primary composite
    /// with it joins it.
    private static func compose(_ scalars: [Unicode.Scalar]) -> [Unicode.Scalar] {
        var out: [Unicode.Scalar] = []
        out.reserveCapacity(scalars.count)
        var starter: Int?
        var lastClass: Int = -1  // of the last scalar kept after the starter; -1 when none
        for scalar in scalars {
            let thisClass = Int(combiningClass(scalar))
            if let starter, lastClass == -1 || (lastClass != 0 && lastClass < thisClass),
               let composite = composite(out[starter], scalar) {
                out[starter] = composite
                continue
            }
            if thisClass == 0 {
                starter = out.count
                lastClass = -1
            } else {
                lastClass = thisClass
            }
            out.append(scalar)
        }
        return out
    }

    private static func composite(_ first: Unicode.Scalar, _ second: Unicode.Scalar) -> Unicode.Scalar? {
        if let syllable = Hangul.compose(first, second) { return syllable }
        return tables.composites[UInt64(first.value) << 32 | UInt64(second.value)]
    }

    // MARK: Hangul (Unicode §3.12)

    private struct Hangul {
        static let sBase: UInt32 = 0xAC00, lBase: UInt32 = 0x1100, vBase: UInt32 = 0x1161, tBase: UInt32 = 0x11A7
        static let lCount: UInt32 = 19, vCount: UInt32 = 21, tCount: UInt32 = 28, sCount: UInt32 = 11_172
        let jamo: [Unicode.Scalar]

        init?(_ scalar: Unicode.Scalar) {
            let index = scalar.value &- Self.sBase
            guard index < Self.sCount else { return nil }
            let l = Self.lBase + index / (Self.vCount * Self.tCount)
            let v = Self.vBase + index % (Self.vCount * Self.tCount) / Self.tCount
            let t = Self.tBase + index % Self.tCount
            jamo = [Unicode.Scalar(l)!, Unicode.Scalar(v)!] + (t == Self.tBase ? [] : [Unicode.Scalar(t)!])
        }

        static func compose(_ first: Unicode.Scalar, _ second: Unicode.Scalar) -> Unicode.Scalar? {
            let l = first.value &- lBase, v = second.value &- vBase
            if l < lCount, v < vCount { return Unicode.Scalar(sBase + (l * vCount + v) * tCount) }
            let s = first.value &- sBase, t = second.value &- tBase
            if s < sCount, s % tCount == 0, t > 0, t < tCount { return Unicode.Scalar(first.value + t) }
            return nil
        }
    }

    // MARK: Tables

    private struct Tables: Sendable {
        var canonical: [UInt32: [Unicode.Scalar]] = [:]
        var compatibility: [UInt32: [Unicode.Scalar]] = [:]
        var composites: [UInt64: Unicode.Scalar] = [:]

        init() {
            for (text, compatibilityTable) in [(UnicodeForms.canonicalText, false), (UnicodeForms.compatibilityText, true)] {
                for line in text.split(separator: "\n") {
                    let scalars = Self.scalars(line)
                    if compatibilityTable { compatibility[scalars[0].value] = Array(scalars.dropFirst()) } else { canonical[scalars[0].value] = Array(scalars.dropFirst()) }
                }
            }
            for line in UnicodeForms.compositeText.split(separator: "\n") {
                let scalars = Self.scalars(line)
                composites[UInt64(scalars[0].value) << 32 | UInt64(scalars[1].value)] = scalars[2]
            }
        }

        static func scalars(_ line: Substring) -> [Unicode.Scalar] {
            line.split(separator: " ").map { Unicode.Scalar(UInt32($0, radix: 16)!)! }
        }
    }

    /// Read from the text on first use (a few milliseconds).
    private static let tables = Tables()
}

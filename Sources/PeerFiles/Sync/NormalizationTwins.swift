/// Names that another name of the same directory equals under Unicode canonical
/// equivalence ("café" with U+00E9 and "cafe" + U+0301, "K" and the Kelvin sign U+212A).
///
/// Linux keeps such names apart (they are different bytes) and so does syncpeer; a file
/// system that normalizes names (macOS, Windows) holds only one of them, so the folder
/// reports them: they sync here, and cannot be placed there.
package enum NormalizationTwins {
    /// Examples kept per scan (the count is exact).
    package static let examplesKept = 20

    /// Those of `names` (one directory's, each once) that have a twin, in the order given.
    /// Only a directory with a name outside ASCII can hold twins, so only then are the
    /// names hashed as `String`s (which compare by canonical equivalence).
    package static func find(_ names: [String]) -> [String] {
        guard names.contains(where: { $0.utf8.contains { $0 >= 0x80 } }) else { return [] }
        var groups: [String: Int] = [:]
        for name in names { groups[name, default: 0] += 1 }
        guard groups.count < names.count else { return [] }
        return names.filter { groups[$0]! > 1 }
    }
}

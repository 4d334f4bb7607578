@testable import PeerFiles
import Testing

/// Names that look alike but differ as bytes: NFC and NFD "é", case, a prefix of another
/// name, a space, a leading dot, a name that sorts between "a" and "a/…" in byte order.
private let names = ["a", "ab", "A", "a b", "a.b", "\u{E9}", "e\u{301}", ".h", "a-"]

/// Every path of one to three components over `names`.
private let universe: [[String]] = {
    var all: [[String]] = names.map { [$0] }
    var layer = all
    for _ in 2...3 {
        layer = layer.flatMap { path in names.map { path + [$0] } }
        all += layer
    }
    return all
}()

/// The rule written the obvious way, on components: at or below a selected path, or a
/// directory strictly above one.
/// Components compare as bytes: Swift's `String ==` would take NFC and NFD "é" as equal.
private func oracle(_ selectedNames: [[String]], _ pathNames: [String], isDirectory: Bool) -> Bool {
    let selection = selectedNames.map { $0.map { Array($0.utf8) } }, path = pathNames.map { Array($0.utf8) }
    if selection.isEmpty { return true }
    if selection.contains(where: { path.starts(with: $0) }) { return true }
    return isDirectory && selection.contains { $0.count > path.count && $0.starts(with: path) }
}

@Suite struct FolderSelectionTests {
    /// Selections of one and two paths drawn from the shallow paths, against every path of
    /// the universe as a file and as a directory.
    static let selections: [[[String]]] = {
        let shallow = universe.filter { $0.count <= 2 }
        var result: [[[String]]] = [[]] + shallow.map { [$0] }
        // Pairs from a spread of the shallow paths (every pair would take a minute in a debug build).
        let seconds = shallow.filter { $0.count == 2 }.enumerated().filter { $0.offset % 7 == 0 }.map(\.element)
        for (i, first) in shallow.enumerated() where i % 10 == 0 {
            for second in seconds where second != first { result.append([first, second]) }
        }
        return result
    }()

    @Test func matchesTheRuleForEveryPathAndSelection() throws {
        var checked = 0
        for chosen in Self.selections {
            let selection = try FolderSelection(chosen.map { $0.joined(separator: "/") })
            for path in universe {
                for isDirectory in [false, true] {
                    let expected = oracle(chosen, path, isDirectory: isDirectory)
                    let got = selection.contains(path.joined(separator: "/"), isDirectory: isDirectory)
                    if got != expected {
                        Issue.record("selection \(chosen) path \(path) dir \(isDirectory): \(got), expected \(expected)")
                        return
                    }
                    checked += 1
                }
            }
        }
        #expect(checked > 100_000)
    }

    @Test(arguments: [
        ("docs", "docs", true), ("docs", "docs/a.txt", true), ("docs", "docs2", false), ("docs", "Docs", false),
        ("docs", "doc", false), ("docs", "docs.txt", false), ("a/b", "a", true), ("a/b", "a/c", false),
        ("a/b", "a/bc", false), ("\u{E9}t\u{E9}", "e\u{301}te\u{301}", false), ("\u{E9}t\u{E9}", "\u{E9}t\u{E9}/x", true),
    ])
    func oneSelectedPath(selected: String, path: String, held: Bool) throws {
        let selection = try FolderSelection([selected])
        #expect(selection.contains(path, isDirectory: true) == held)
    }

    @Test func aFileAboveASelectedPathIsNotHeld() throws {
        let selection = try FolderSelection(["photos/2024"])
        #expect(selection.contains("photos", isDirectory: true))
        #expect(!selection.contains("photos", isDirectory: false))
        #expect(!selection.contains("photos/x.jpg", isDirectory: false))
        #expect(selection.contains("photos/2024/x.jpg", isDirectory: false))
    }

    @Test(arguments: ["..", "a/../b", "a/..", "/etc", "", "a//b", "./a", "a/./b", "a\\b", "a\u{0}b", "a\nb",
                      String(repeating: "x", count: 256), String(repeating: "x/", count: 2_100)])
    func refusesPathsThatLeaveOrBendTheFolder(path: String) {
        #expect(throws: FolderSelectionError.self) { try FolderSelection([path]) }
    }

    @Test func normalizesTrailingSlashesOrderAndNesting() throws {
        let selection = try FolderSelection(["b/", "a/x", "a", "a0", "b/c/d", "a/x/y"])
        #expect(selection.paths == ["a", "a0", "b"])
        #expect(try FolderSelection(["z/", "z"]).paths == ["z"])
        #expect(FolderSelection().isEverything && FolderSelection().contains("anything/at/all", isDirectory: false))
    }

    @Test func boundsTheNumberOfPaths() throws {
        _ = try FolderSelection((0..<FolderSelection.maxPaths).map { "p\($0)" })
        #expect(throws: FolderSelectionError.tooMany(count: FolderSelection.maxPaths + 1, limit: FolderSelection.maxPaths)) {
            try FolderSelection((0...FolderSelection.maxPaths).map { "p\($0)" })
        }
    }

    @Test func holdsAllAndOverlapsSayWhatTheTreeShows() throws {
        let selection = try FolderSelection(["a/b"])
        #expect(selection.holdsAll(under: "a/b") && selection.holdsAll(under: "a/b/c"))
        #expect(!selection.holdsAll(under: "a") && selection.overlaps("a"))
        #expect(!selection.overlaps("a/c") && !selection.overlaps("b") && !selection.overlaps("a/bc"))
        #expect(selection.overlaps(""))
    }

    /// The ignore patterns carry the selection: what lies outside is ignored everywhere they
    /// are asked (scanner, watcher, planner, block server), built-ins still apply inside.
    @Test func ignorePatternsIgnoreWhatLiesOutside() throws {
        var ignores = IgnorePatterns("*.tmp")
        ignores.selection = try FolderSelection(["keep"])
        #expect(ignores.isIgnored("other/x", isDirectory: false))
        #expect(ignores.isIgnored("other", isDirectory: true))
        #expect(!ignores.isIgnored("keep/x", isDirectory: false))
        #expect(ignores.isIgnored("keep/x.tmp", isDirectory: false))
        #expect(ignores.isIgnored("keep/.syncpeer-partial", isDirectory: true))
        #expect(ignores.ignoresEntry(parent: [], name: Array("other".utf8), isDirectory: true))
        #expect(!ignores.ignoresEntry(parent: [Array("keep".utf8)], name: Array("y".utf8), isDirectory: false))
    }
}

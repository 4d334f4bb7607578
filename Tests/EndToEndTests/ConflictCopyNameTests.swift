import Foundation
import Glibc
import Testing

/// Conflict copies get names that are never taken: two losing versions of one device in the
/// same second are both kept, and the folder settles. Three real daemons on 127.0.0.1.
@Suite(.serialized)
struct ConflictCopyNameTests {
    typealias Trio = FolderSyncTests.Trio

    /// Chaos seed 1010: bob edited a file twice 0.3 s apart and lost both times to alice; both
    /// copies got one name (whole seconds and the device), the second could never be made,
    /// and the folder never settled ("that name exists"). Now both of bob's versions are kept,
    /// on every node, and every node ends with the same tree.
    @Test func twoLosingEditsInOneSecondAreBothKept() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        try "original".write(toFile: trio.path("alice", "notes.txt"), atomically: true, encoding: .utf8)
        try trio.share()
        try FolderSyncTests.eventually("notes.txt everywhere") {
            trio.all.allSatisfy { FileManager.default.fileExists(atPath: trio.path($0, "notes.txt")) }
        }
        let second: Int64 = 1_700_000_000   // both of bob's edits have their mtime in this second
        for (round, nanoseconds) in [(1, Int64(100_000_000)), (2, Int64(400_000_000))] {
            trio.alice.stop()
            try Self.replace(trio.path("bob", "notes.txt"), with: "bob's edit \(round)", mtimeNs: second * 1_000_000_000 + nanoseconds)
            try Self.replace(trio.path("alice", "notes.txt"), with: "alice's edit \(round)",
                             mtimeNs: (second + 1_000 * Int64(round)) * 1_000_000_000)
            trio.alice = try trio.restart(trio.alice)
            try FolderSyncTests.eventually("round \(round): every node has alice's edit and \(round) copies of bob's", timeout: 60) {
                FolderSyncTests.converged(trio) && trio.all.allSatisfy { node in
                    (try? String(contentsOfFile: trio.path(node, "notes.txt"), encoding: .utf8)) == "alice's edit \(round)"
                        && Set(Self.copyTexts(trio, node)).count == round
                }
            }
        }
        for node in trio.all {
            #expect(Set(Self.copyTexts(trio, node)) == ["bob's edit 1", "bob's edit 2"], "\(node): \(FolderSyncTests.describe(trio))")
            let status = try FolderSyncTests.folderStatus(trio, node == "alice" ? trio.alice : node == "bob" ? trio.bob : trio.carol)
            #expect(((status["failures"] as? [Any]) ?? []).isEmpty, "\(node): \(status)")
        }
    }

    /// The texts of the conflict copies of notes.txt on `node`.
    static func copyTexts(_ trio: Trio, _ node: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: trio.folders[node]!)) ?? []
        return names.filter { $0.hasPrefix("notes.sync-conflict-") && $0.hasSuffix(".txt") }.sorted()
            .compactMap { try? String(contentsOfFile: trio.path(node, $0), encoding: .utf8) }
    }

    /// Puts `text` at `path` in one rename, already with its mtime: a watcher sees one change.
    static func replace(_ path: String, with text: String, mtimeNs: Int64) throws {
        let temporary = (path as NSString).deletingLastPathComponent + "/../edit-\(getpid()).tmp"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        try TestFiles.setMtime(temporary, mtimeNs)
        guard rename(temporary, path) == 0 else { throw POSIXError(.EIO) }
    }
}

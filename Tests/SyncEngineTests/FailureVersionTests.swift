import Testing
@testable import PeerFiles
@testable import PeerModel
@testable import SyncEngine

/// What a failed path was meant to become (`PullFailure.version`: a kept temp file is reused
/// only for that version) comes from the actions performed so far, made at the first failure.
@Suite struct FailureVersionTests {
    static func file(_ path: String, _ root: UInt8, deleted: Bool = false) -> FileEntry {
        FileEntry(path: path, kind: .file, size: 1, mtimeNs: 1, mode: 0o644, deleted: deleted, version: ["a": 1],
                  rootHash: deleted ? nil : [root], modifiedBy: "a")
    }

    @Test func eachPathWantsWhatItsLastActionSays() {
        let actions: [SyncAction] = [
            .upToDate,
            .pull(Self.file("a", 1), from: "p"),
            .keepLocal(Self.file("k", 9)),
            .rename(from: Self.file("old", 2, deleted: true), to: Self.file("new", 2), source: "p"),
            .conflict(winner: Self.file("c", 3), from: "p", loser: Self.file("c", 4), loserCopyName: "c (1)"),
            .delete(Self.file("d", 0, deleted: true), from: "p"),
            .pull(Self.file("a", 5), from: "p"),   // a later action for the same path wins
        ]
        let wanted = FolderApplier.wanted(by: actions).mapValues(PullFailure.version)
        #expect(wanted == [
            PathKey("a"): PullFailure.version(of: Self.file("a", 5)),
            PathKey("old"): PullFailure.version(of: Self.file("old", 2, deleted: true)),
            PathKey("new"): PullFailure.version(of: Self.file("new", 2)),
            PathKey("c"): PullFailure.version(of: Self.file("c", 3)),
            PathKey("d"): PullFailure.version(of: Self.file("d", 0, deleted: true)),
        ])
        // Only the actions performed so far count: the later pull of "a" is not there yet.
        #expect(FolderApplier.wanted(by: actions.prefix(2))[PathKey("a")].map(PullFailure.version)
                == PullFailure.version(of: Self.file("a", 1)))
    }
}

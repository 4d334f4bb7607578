import PeerModel
import Testing
@testable import SyncEngine

/// One row of the table of `DirectoryDeletion.decide`: what `sub` (deleted by devB) holds here.
struct DirectoryDeletionCase: Sendable, CustomTestStringConvertible {
    let name: String
    let children: [DirectoryDeletion.Child]
    let keeps: Bool
    var testDescription: String { name }
}

let directoryDeletionTable: [DirectoryDeletionCase] = {
    let a1 = vv([devA: 1]), a1b1 = vv([devA: 1, devB: 1]), a1c1 = vv([devA: 1, devC: 1]), a2 = vv([devA: 2])
    func child(_ local: FileEntry?, _ deleter: FileEntry?) -> DirectoryDeletion.Child { .init(local: local, deleter: deleter) }
    var rows: [DirectoryDeletionCase] = []
    func row(_ name: String, _ children: [DirectoryDeletion.Child], keeps: Bool) {
        rows.append(DirectoryDeletionCase(name: name, children: children, keeps: keeps))
    }
    // What the deletion covers: the deleting peer has seen our version of the entry.
    row("the deleter's tombstone of the entry is not here yet (it has our version, live)",
        [child(file("sub/f.txt", a1), file("sub/f.txt", a1))], keeps: false)
    row("the deleter deleted the entry we have (its tombstone dominates ours)",
        [child(file("sub/f.txt", a1), tombstone("sub/f.txt", a1b1, by: devB))], keeps: false)
    row("a subdirectory the deleter has at our version",
        [child(directory("sub/inner", a1), directory("sub/inner", a1))], keeps: false)
    // What survives it.
    row("an edit made here concurrently with the deletion (the chaos case)",
        [child(file("sub/f.txt", a1c1, content: 2, by: devC), tombstone("sub/f.txt", a1b1, by: devB))], keeps: true)
    row("an edit made here the deleter never saw (its entry is older)",
        [child(file("sub/f.txt", a2, content: 2), file("sub/f.txt", a1))], keeps: true)
    row("an entry the deleter never had", [child(file("sub/new.txt", vv([devC: 1]), by: devC), nil)], keeps: true)
    row("an entry on disk not scanned yet", [child(nil, nil)], keeps: true)
    row("an entry recorded as deleted here but back on disk",
        [child(tombstone("sub/f.txt", a1c1, by: devC), tombstone("sub/f.txt", a1b1, by: devB))], keeps: true)
    row("a subdirectory kept over the same deletion (a newer version of ours)",
        [child(directory("sub/inner", vv([devA: 1, devB: 1, devC: 1]), by: devC), tombstone("sub/inner", a1b1, by: devB))],
        keeps: true)
    row("one survivor among covered entries",
        [child(file("sub/a", a1), file("sub/a", a1)), child(file("sub/b", a1c1, by: devC), file("sub/b", a1))], keeps: true)
    row("nothing inside but temporary files (listed as no entry)", [], keeps: false)
    return rows
}()

@Suite struct DirectoryDeletionTests {
    static let tombstoneOfSub = FileEntry(path: "sub", kind: .directory, mtimeNs: t0, mode: 0o755, deleted: true,
                                          version: vv([devA: 1, devB: 1]), modifiedBy: devB)

    @Test(arguments: directoryDeletionTable)
    func keepsTheDirectoryOnlyForWhatSurvivesTheDeletion(_ row: DirectoryDeletionCase) {
        let decision = DirectoryDeletion.decide(local: directory("sub", vv([devA: 1])), tombstone: Self.tombstoneOfSub,
                                                children: row.children, device: devC, mtimeNs: t0 + 5, mode: 0o700)
        if row.keeps {
            guard case .keep = decision else { Issue.record("expected the directory kept, got \(decision)"); return }
        } else {
            #expect(decision == .wait)
        }
    }

    /// The kept directory is a change of ours on top of the deletion: every node takes it
    /// over the tombstone (a plain update, never a conflict), and it carries the disk's metadata.
    @Test func theKeptDirectoryDominatesTheDeletionEverywhere() throws {
        let local = directory("sub", vv([devA: 1, devC: 3]), by: devC)
        let decision = DirectoryDeletion.decide(local: local, tombstone: Self.tombstoneOfSub,
                                                children: [.init(local: nil, deleter: nil)], device: devC, mtimeNs: t0 + 5, mode: 0o700)
        guard case let .keep(kept) = decision else { Issue.record("not kept: \(decision)"); return }
        #expect(kept == FileEntry(path: "sub", kind: .directory, mtimeNs: t0 + 5, mode: 0o700,
                                  version: vv([devA: 1, devB: 1, devC: 4]), modifiedBy: devC))
        #expect(kept.version.compare(Self.tombstoneOfSub.version) == .greater)
        #expect(kept.version.compare(local.version) == .greater)
        // The deleting peer plans it as a plain pull of the directory.
        #expect(SyncPlanner().plan(local: Self.tombstoneOfSub, remotes: [devC: kept]) == .pull(kept, from: devC))
        // A node that still has the old directory only updates its record.
        #expect(SyncPlanner().plan(local: directory("sub", vv([devA: 1])), remotes: [devB: Self.tombstoneOfSub, devC: kept])
                == .updateMetadata(kept, from: devC))
    }
}

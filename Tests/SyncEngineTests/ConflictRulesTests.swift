import PeerModel
import PeerFiles
import Testing
@testable import SyncEngine
import TestKit

/// One row of the planner's decision table.
struct PlanCase: Sendable, CustomTestStringConvertible {
    let name: String
    let local: FileEntry?
    let remotes: [String: FileEntry]
    let expected: SyncAction
    var testDescription: String { name }
}

/// "doc.sync-conflict-20231114-221320-AAAAAAA-TAG.txt": t0 is 2023-11-14 22:13:20 UTC; every
/// losing local state of the table has version {A:2}, whose tag this is.
let tagOfA2 = ConflictName.tag(of: Array(vv([devA: 2]).json.utf8))
let copyOfA = "doc.sync-conflict-20231114-221320-AAAAAAA-\(tagOfA2).txt"

let planTable: [PlanCase] = {
    let a1 = vv([devA: 1]), a2 = vv([devA: 2]), a1b1 = vv([devA: 1, devB: 1]), a2b1 = vv([devA: 2, devB: 1])
    var rows: [PlanCase] = []
    func row(_ name: String, _ local: FileEntry?, _ remotes: [String: FileEntry], _ expected: SyncAction) {
        rows.append(PlanCase(name: name, local: local, remotes: remotes, expected: expected))
    }
    // Ordered versions.
    row("equal versions", file(a1), [devB: file(a1)], .upToDate)
    row("local dominates", file(a2, content: 2), [devB: file(a1)], .upToDate)
    row("remote dominates with new content", file(a1), [devB: file(a1b1, content: 2, by: devB)],
        .pull(file(a1b1, content: 2, by: devB), from: devB))
    row("metadata-only change (mode)", file(a1), [devB: file(a1b1, by: devB, mode: 0o600)],
        .updateMetadata(file(a1b1, by: devB, mode: 0o600), from: devB))
    row("new path", nil, [devB: file(vv([devB: 1]), by: devB)], .pull(file(vv([devB: 1]), by: devB), from: devB))
    row("remote with an empty version and no local state", nil, [devB: file(VersionVector(), by: devB)], .upToDate)
    // Deletions.
    row("remote tombstone dominates", file(a1), [devB: tombstone(a1b1, by: devB)], .delete(tombstone(a1b1, by: devB), from: devB))
    row("remote tombstone is older", file(a2), [devB: tombstone(a1)], .upToDate)
    row("tombstone concurrent with a local edit: the edit wins", file(a2),
        [devB: tombstone(a1b1, mtime: t0 + 10, by: devB)], .keepLocal(file(a2b1)))
    row("local tombstone concurrent with a remote edit: the edit wins", tombstone(a2, mtime: t0 + 10),
        [devB: file(a1b1, content: 2, by: devB)], .pull(file(a2b1, content: 2, by: devB), from: devB))
    row("local tombstone, newer remote edit", tombstone(a2), [devB: file(vv([devA: 2, devB: 1]), content: 3, by: devB)],
        .pull(file(a2b1, content: 3, by: devB), from: devB))
    row("path we never had, deleted remotely: record the tombstone", nil, [devB: tombstone(vv([devB: 2]), by: devB)],
        .delete(tombstone(vv([devB: 2]), by: devB), from: devB))
    row("concurrent tombstones, remote newer", tombstone(a2, mtime: t0 + 1), [devB: tombstone(a1b1, mtime: t0 + 2, by: devB)],
        .delete(tombstone(a2b1, mtime: t0 + 2, by: devB), from: devB))
    row("concurrent tombstones, local newer", tombstone(a2, mtime: t0 + 3), [devB: tombstone(a1b1, mtime: t0 + 2, by: devB)],
        .keepLocal(tombstone(a2b1, mtime: t0 + 3)))
    // Concurrent edits.
    row("concurrent, remote has the newer mtime", file(a2, content: 2, mtime: t0 + 5),
        [devB: file(a1b1, content: 3, mtime: t0 + 9, by: devB)],
        .conflict(winner: file(a2b1, content: 3, mtime: t0 + 9, by: devB), from: devB,
                  loser: file(a2, content: 2, mtime: t0 + 5), loserCopyName: copyOfA))
    // The local edit wins over a peer's edit: nothing to do here (the peer keeps its edit as
    // a conflict copy, then its merged version comes back as a metadata update).
    row("concurrent, local has the newer mtime", file(a2, content: 2, mtime: t0 + 9),
        [devB: file(a1b1, content: 3, mtime: t0 + 5, by: devB)], .upToDate)
    row("concurrent, same mtime: the larger device (remote B over local A) wins", file(a2, content: 2),
        [devB: file(a1b1, content: 3, by: devB)],
        .conflict(winner: file(a2b1, content: 3, by: devB), from: devB, loser: file(a2, content: 2), loserCopyName: copyOfA))
    row("concurrent, same mtime: the larger device (local C over remote B) wins", file(vv([devC: 1]), content: 2, by: devC),
        [devB: file(vv([devB: 1]), content: 3, by: devB)], .upToDate)
    row("concurrent identical content: no conflict copy", file(a2, content: 5, mtime: t0 + 1),
        [devB: file(a1b1, content: 5, mtime: t0 + 2, by: devB)],
        .updateMetadata(file(a2b1, content: 5, mtime: t0 + 2, by: devB), from: devB))
    // Kinds.
    row("a remote directory beats a newer local file", file(a2, mtime: t0 + 9), [devB: directory(a1b1, by: devB)],
        .conflict(winner: directory(a2b1, by: devB), from: devB, loser: file(a2, mtime: t0 + 9),
                  loserCopyName: copyOfA))
    row("a local directory beats a newer remote file", directory(a2), [devB: file(a1b1, mtime: t0 + 9, by: devB)], .upToDate)
    row("concurrent directory metadata", directory(a2, mtime: t0 + 1, mode: 0o700),
        [devB: directory(a1b1, mtime: t0 + 2, by: devB, mode: 0o750)],
        .updateMetadata(directory(a2b1, mtime: t0 + 2, by: devB, mode: 0o750), from: devB))
    row("a file becomes a directory", file(a1), [devB: directory(a1b1, by: devB)], .pull(directory(a1b1, by: devB), from: devB))
    row("a directory becomes a file", directory(a1), [devB: file(a1b1, by: devB)], .pull(file(a1b1, by: devB), from: devB))
    row("directory mode change", directory(a1), [devB: directory(a1b1, by: devB, mode: 0o700)],
        .updateMetadata(directory(a1b1, by: devB, mode: 0o700), from: devB))
    row("symlink retargeted", symlink("link", a1, target: "a"), [devB: symlink("link", a1b1, target: "b", by: devB)],
        .pull(symlink("link", a1b1, target: "b", by: devB), from: devB))
    row("symlink mode only", symlink("link", a1, target: "a"), [devB: symlink("link", a1b1, target: "a", by: devB, mode: 0o755)],
        .updateMetadata(symlink("link", a1b1, target: "a", by: devB, mode: 0o755), from: devB))
    row("concurrent symlinks", symlink("link", a2, target: "a", mtime: t0 + 1),
        [devB: symlink("link", a1b1, target: "b", mtime: t0 + 2, by: devB)],
        .conflict(winner: symlink("link", a2b1, target: "b", mtime: t0 + 2, by: devB), from: devB,
                  loser: symlink("link", a2, target: "a", mtime: t0 + 1), loserCopyName: "link.sync-conflict-20231114-221320-AAAAAAA-\(tagOfA2)"))
    // Several peers.
    row("three peers: one behind, one ahead", file(a2b1, content: 2),
        [devB: file(a1b1, by: devB), devC: file(vv([devA: 2, devB: 1, devC: 1]), content: 3, by: devC)],
        .pull(file(vv([devA: 2, devB: 1, devC: 1]), content: 3, by: devC), from: devC))
    row("three peers: one equal, one behind", file(a2), [devB: file(a2), devC: file(a1)], .upToDate)
    // B's losing edit is not merged here: B must see C's edit as concurrent and keep a copy.
    row("two peers concurrent with each other, both ahead of us: no local copy", file(a1),
        [devB: file(a1b1, content: 2, mtime: t0 + 1, by: devB), devC: file(vv([devA: 1, devC: 1]), content: 3, mtime: t0 + 2, by: devC)],
        .pull(file(vv([devA: 1, devC: 1]), content: 3, mtime: t0 + 2, by: devC), from: devC))
    row("two peers with the same version: the first device is the source", nil,
        [devC: file(vv([devB: 1]), by: devB), devB: file(vv([devB: 1]), by: devB)], .pull(file(vv([devB: 1]), by: devB), from: devB))
    row("one peer concurrent with us, one behind: conflict with the concurrent one", file(a2, content: 2),
        [devB: file(a1), devC: file(vv([devA: 1, devC: 1]), content: 3, mtime: t0 + 1, by: devC)],
        .conflict(winner: file(vv([devA: 2, devC: 1]), content: 3, mtime: t0 + 1, by: devC), from: devC,
                  loser: file(a2, content: 2), loserCopyName: copyOfA))
    return rows
}()

@Suite struct ConflictRulesTests {
    @Test(arguments: planTable)
    func plannerDecides(_ row: PlanCase) {
        #expect(SyncPlanner().plan(local: row.local, remotes: row.remotes) == row.expected)
    }

    @Test func conflictCopyNames() {
        let cases: [(String, Int64, String, String)] = [
            ("doc.txt", t0, devA, copyOfA),
            ("dir/sub/report.final.pdf", t0, devB, "dir/sub/report.final.sync-conflict-20231114-221320-BBBBBBB-\(tagOfA2).pdf"),
            ("Makefile", 0, devC, "Makefile.sync-conflict-19700101-000000-CCCCCCC-\(tagOfA2)"),
            (".bashrc", 86_399_999_999_999, devA, ".bashrc.sync-conflict-19700101-235959-AAAAAAA-\(tagOfA2)"),
            ("a/.hidden.conf", 951_782_400_000_000_000, devA, "a/.hidden.sync-conflict-20000229-000000-AAAAAAA-\(tagOfA2).conf"),
            ("dir.d/noext", -1, devA, "dir.d/noext.sync-conflict-19691231-235959-AAAAAAA-\(tagOfA2)"),
            ("x.", 4_102_444_800_000_000_000, "SHORT", "x..sync-conflict-21000101-000000-SHORT-\(tagOfA2)"),
        ]
        #expect(tagOfA2.utf8.count == 8 && tagOfA2.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        for (path, mtime, device, expected) in cases {
            #expect(ConflictRules.conflictCopyName(for: path, mtimeNs: mtime, device: device, version: vv([devA: 2])) == expected)
        }
    }

    /// Chaos seed 1010: bob edited a file twice 0.3 s apart and lost both times; the copies
    /// shared one name (whole seconds, one device), so the second could never be made. Two
    /// losing versions in one second now get two names; the same losing version gets one
    /// name on every node, whoever holds it (bob, or carol who had taken bob's edit).
    @Test func losersInOneSecondGetTwoNamesAndOneLoserOneName() {
        let first = file(vv([devA: 1, devB: 2]), content: 2, mtime: t0 + 100_000_000, by: devB)
        let second = file(vv([devA: 1, devB: 3]), content: 3, mtime: t0 + 400_000_000, by: devB)
        let winner = file(vv([devA: 2, devB: 1]), content: 9, mtime: t0 + 900_000_000, by: devA)
        func copy(_ planner: SyncPlanner, _ loser: FileEntry) -> String? {
            guard case .conflict(_, _, _, let name) = planner.plan(local: loser, remotes: [devA: winner]) else { return nil }
            return name
        }
        let onBob = SyncPlanner(localDevice: devB), onCarol = SyncPlanner(localDevice: devC)
        let names = [copy(onBob, first), copy(onBob, second)]
        #expect(names[0] != nil && names[1] != nil && names[0] != names[1], "\(names)")
        #expect(names.allSatisfy { $0?.hasPrefix("doc.sync-conflict-20231114-221320-BBBBBBB-") == true }, "\(names)")
        #expect(copy(onCarol, first) == names[0] && copy(onCarol, second) == names[1])
        #expect(names.allSatisfy { $0.map { ConflictName.isCopy($0, of: "doc.txt") } == true })
    }

    @Test func winnerRuleIsATotalOrder() {
        var rng = SplitMix64(seed: 7)
        let states = (0..<60).map { _ in randomState(&rng) }
        for a in states {
            #expect(!ConflictRules.beats(a, a))
            for b in states where a != b {
                #expect(ConflictRules.beats(a, b) != ConflictRules.beats(b, a), "exactly one of two different states wins")
                for c in states where ConflictRules.beats(a, b) && ConflictRules.beats(b, c) {
                    #expect(ConflictRules.beats(a, c), "transitive")
                }
            }
        }
    }

    @Test func batchPlanningSkipsUpToDatePaths() {
        let local: [PathKey: FileEntry] = ["a": file("a", vv([devA: 1])), "b": file("b", vv([devA: 1]))]
        let remotes: [PathKey: [String: FileEntry]] = ["a": [devB: file("a", vv([devA: 1]))], "b": [devB: file("b", vv([devA: 1, devB: 1]), content: 2, by: devB)],
                       "c": [devB: file("c", vv([devB: 1]), by: devB)]]
        let actions = SyncPlanner().plan(local: local, remotes: remotes)
        #expect(actions.flatMap(\.paths) == ["b", "c"])
    }
}

// MARK: Renames

@Suite struct RenameDetectionTests {
    let local: [PathKey: FileEntry] = [
        "old.txt": file("old.txt", vv([devA: 1]), content: 7),
        "twin1": file("twin1", vv([devA: 1]), content: 8),
        "twin2": file("twin2", vv([devA: 1]), content: 8),
        "dir": directory("dir", vv([devA: 1])),
        "exists.txt": file("exists.txt", vv([devA: 1]), content: 9),
    ]

    @Test func deleteAndPullOfTheSameContentBecomeARename() {
        let gone = tombstone("old.txt", vv([devA: 1, devB: 1]), by: devB)
        let moved = file("new/place.txt", vv([devB: 1]), content: 7, by: devB)
        let other = file("other.txt", vv([devB: 1]), content: 3, by: devB)
        let actions: [SyncAction] = [.delete(gone, from: devB), .pull(moved, from: devB), .pull(other, from: devB)]
        #expect(SyncPlanner.planRenames(actions, local: local)
                == [.rename(from: gone, to: moved, source: devB), .pull(other, from: devB)])
    }

    @Test func pairsAreMadeOnceEachInPathOrder() {
        let d1 = tombstone("twin1", vv([devA: 1, devB: 1]), by: devB), d2 = tombstone("twin2", vv([devA: 1, devB: 1]), by: devB)
        let p1 = file("z-copy", vv([devB: 1]), content: 8, by: devB), p2 = file("a-copy", vv([devB: 1]), content: 8, by: devB)
        let p3 = file("m-copy", vv([devB: 1]), content: 8, by: devB)
        let actions: [SyncAction] = [.pull(p1, from: devB), .delete(d2, from: devB), .pull(p2, from: devC), .delete(d1, from: devB),
                                     .pull(p3, from: devB)]
        #expect(SyncPlanner.planRenames(actions, local: local) == [
            .pull(p1, from: devB), .rename(from: d1, to: p2, source: devC), .rename(from: d2, to: p3, source: devB),
        ])
    }

    @Test func noRenameWithoutMatchingLiveLocalContent() {
        let moved = file("new.txt", vv([devB: 1]), content: 7, by: devB)
        // Different content.
        let other = tombstone("exists.txt", vv([devA: 1, devB: 1]), by: devB)
        #expect(SyncPlanner.planRenames([.delete(other, from: devB), .pull(moved, from: devB)], local: local)
                == [.delete(other, from: devB), .pull(moved, from: devB)])
        // A directory deleted, a file pulled: not a rename.
        let dirGone = tombstone("dir", vv([devA: 1, devB: 1]), by: devB)
        #expect(SyncPlanner.planRenames([.delete(dirGone, from: devB), .pull(moved, from: devB)], local: local).count == 2)
        // The target exists locally (an update, not a creation): not a rename.
        let gone = tombstone("old.txt", vv([devA: 1, devB: 1]), by: devB)
        let overwrite = file("exists.txt", vv([devA: 1, devB: 1]), content: 7, by: devB)
        #expect(SyncPlanner.planRenames([.delete(gone, from: devB), .pull(overwrite, from: devB)], local: local)
                == [.delete(gone, from: devB), .pull(overwrite, from: devB)])
        // A path not in the local index (a tombstone recorded for a path we never had).
        let unknown = tombstone("never.txt", vv([devB: 2]), by: devB)
        #expect(SyncPlanner.planRenames([.delete(unknown, from: devB), .pull(moved, from: devB)], local: local).count == 2)
    }

    @Test func plannedBatchRenamesEndToEnd() {
        // A peer renamed old.txt → docs/new.txt: its index shows a tombstone and a new file.
        let remotes: [PathKey: [String: FileEntry]] = ["old.txt": [devB: tombstone("old.txt", vv([devA: 1, devB: 1]), by: devB)],
                       "docs/new.txt": [devB: file("docs/new.txt", vv([devB: 1]), content: 7, by: devB)]]
        let actions = SyncPlanner.planRenames(SyncPlanner().plan(local: local, remotes: remotes), local: local)
        #expect(actions == [.rename(from: tombstone("old.txt", vv([devA: 1, devB: 1]), by: devB),
                                    to: file("docs/new.txt", vv([devB: 1]), content: 7, by: devB), source: devB)])
    }
}

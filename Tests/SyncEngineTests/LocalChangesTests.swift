import Testing
@testable import SyncEngine

@Suite struct LocalChangesTests {
    let changes = LocalChanges(localDevice: devA)

    func entry(_ path: String, content: UInt8 = 1, mtime: Int64 = t0, mode: UInt32 = 0o644) -> ScannedEntry {
        ScannedEntry(path: path, kind: .file, size: 100 + Int64(content), mtimeNs: mtime, mode: mode, rootHash: hash(content))
    }

    @Test func scanBecomesRecords() throws {
        let old: [String: FileState] = [
            "same.txt": file("same.txt", vv([devB: 3]), by: devB),
            "edited.txt": file("edited.txt", vv([devA: 1, devB: 2]), by: devB),
            "chmod.txt": file("chmod.txt", vv([devB: 1]), by: devB),
            "gone.txt": file("gone.txt", vv([devA: 2, devC: 1]), by: devC),
            "already-gone.txt": tombstone("already-gone.txt", vv([devA: 3])),
            "back.txt": tombstone("back.txt", vv([devB: 4]), by: devB),
            "dir": directory("dir", vv([devB: 1]), by: devB),
        ]
        let scan = LocalScanResult(rootPresent: true, present: [
            entry("same.txt"), entry("edited.txt", content: 2, mtime: t0 + 5), entry("chmod.txt", mode: 0o600),
            entry("new.txt", content: 3), entry("back.txt", content: 4),
            ScannedEntry(path: "dir", kind: .directory, mtimeNs: t0 + 99, mode: 0o755), // only its mtime moved
            ScannedEntry(path: "link", kind: .symlink, mtimeNs: t0, mode: 0o777, symlinkTarget: "dir"),
        ], deleted: ["gone.txt", "already-gone.txt", "never-known.txt"])
        let records = try changes.records(for: scan, old: { old[$0] }, liveEntriesBefore: 5, deletedAtNs: t0 + 1_000).get()
        let byPath = Dictionary(uniqueKeysWithValues: records.map { ($0.path, $0) })
        #expect(records.map(\.path) == ["back.txt", "chmod.txt", "edited.txt", "gone.txt", "link", "new.txt"])
        #expect(byPath["edited.txt"]?.version == vv([devA: 2, devB: 2]))
        #expect(byPath["edited.txt"]?.rootHash == hash(2) && byPath["edited.txt"]?.modifiedBy == devA)
        #expect(byPath["chmod.txt"]?.version == vv([devA: 1, devB: 1]) && byPath["chmod.txt"]?.mode == 0o600)
        #expect(byPath["new.txt"]?.version == vv([devA: 1]))
        #expect(byPath["back.txt"]?.version == vv([devA: 1, devB: 4]), "a re-created path continues the tombstone's history")
        #expect(byPath["link"]?.symlinkTarget == "dir" && byPath["link"]?.rootHash == nil)
        let gone = try #require(byPath["gone.txt"])
        #expect(gone.deleted && gone.version == vv([devA: 3, devC: 1]) && gone.modifiedBy == devA)
        #expect(gone.size == 0 && gone.rootHash == nil && gone.mtimeNs == t0 + 1_000)
        #expect(records.allSatisfy { $0.sequence == 0 })
        // The new records dominate the old ones, so peers take them.
        for record in records { if let before = old[record.path] { #expect(record.version.compare(before.version) == .greater) } }
    }

    @Test func counterFloorKeepsCountersGrowingAfterAnIndexLoss() {
        let clocked = LocalChanges(localDevice: devA, counterFloor: 1_700_000_000)
        #expect(clocked.record(for: entry("x"), old: nil)?.version == vv([devA: 1_700_000_000]))
        let later = file("x", vv([devA: 1_700_000_005]))
        #expect(clocked.record(for: entry("x", content: 2), old: later)?.version == vv([devA: 1_700_000_006]))
    }

    @Test func massDeletionGuard() {
        let missing = LocalScanResult(rootPresent: false, present: [], deleted: ["a", "b"])
        #expect(MassDeletionGuard.check(missing, liveEntriesBefore: 2) == .rootMissing)
        #expect(MassDeletionGuard.check(LocalScanResult(rootPresent: false), liveEntriesBefore: 0) == .rootMissing,
                "a missing root stops the folder even with nothing to delete")
        let allGone = LocalScanResult(rootPresent: true, present: [], deleted: (0..<50).map { "f\($0)" })
        #expect(MassDeletionGuard.check(allGone, liveEntriesBefore: 50) == .everythingDeleted(count: 50))
        #expect(MassDeletionGuard.check(allGone, liveEntriesBefore: 50, allowDeletingEverything: true) == nil)
        #expect(MassDeletionGuard.check(LocalScanResult(rootPresent: true, deleted: ["a", "b"]), liveEntriesBefore: 2) == nil,
                "a small folder may be emptied")
        let most = LocalScanResult(rootPresent: true, present: [entry("keep")], deleted: (0..<49).map { "f\($0)" })
        #expect(MassDeletionGuard.check(most, liveEntriesBefore: 50) == nil)

        let old = ["a": file("a", vv([devA: 1])), "b": file("b", vv([devA: 1]))]
        let refused = changes.records(for: missing, old: { old[$0] }, liveEntriesBefore: 2, deletedAtNs: t0)
        #expect(refused == .failure(.rootMissing))
        #expect(MassDeletionGuard.Refusal.rootMissing.description.contains("root is missing"))
    }
}

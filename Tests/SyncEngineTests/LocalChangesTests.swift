import PeerModel
import Testing
@testable import SyncEngine

@Suite struct LocalChangesTests {
    let changes = LocalChanges(localDevice: devA)

    func entry(_ path: String, content: UInt8 = 1, mtime: Int64 = t0, mode: UInt32 = 0o644) -> FileEntry {
        onDisk(path: path, kind: .file, size: 100 + Int64(content), mtimeNs: mtime, mode: mode, rootHash: hash(content))
    }

    @Test func scanBecomesRecords() throws {
        let old: [String: FileEntry] = [
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
            onDisk(path: "dir", kind: .directory, mtimeNs: t0 + 99, mode: 0o755), // only its mtime moved
            onDisk(path: "link", kind: .symlink, mtimeNs: t0, mode: 0o777, symlinkTarget: "dir"),
        ], deleted: ["gone.txt", "already-gone.txt", "never-known.txt"])
        let records = try changes.records(for: scan, old: { old[$0] }, deletedAtNs: t0 + 1_000).get()
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

    struct GuardCase: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let totals: ScanTotals
        let confirmed: Bool
        let refusal: MassDeletionGuard.Refusal?
    }

    static func totals(before: (entries: Int, files: Int), after: (entries: Int, files: Int)? = nil,
                       deleted: (entries: Int, files: Int)) -> ScanTotals {
        let after = after ?? before
        return ScanTotals(entriesBefore: before.entries, filesBefore: before.files, entriesAfterAdditions: after.entries,
                          filesAfterAdditions: after.files, deletedEntries: deleted.entries, deletedFiles: deleted.files)
    }

    /// The guard judges the whole scan: what matters is what the folder is left with, not
    /// how many deletions one batch of 1,000 holds.
    @Test(arguments: [
        GuardCase(testDescription: "an unmounted 1,500-file folder: every entry gone",
                  totals: totals(before: (1_500, 1_500), deleted: (1_500, 1_500)), confirmed: false,
                  refusal: .everythingDeleted(count: 1_500)),
        GuardCase(testDescription: "2,500 entries in folders, all gone",
                  totals: totals(before: (2_500, 2_400), deleted: (2_500, 2_400)), confirmed: false,
                  refusal: .everythingDeleted(count: 2_500)),
        GuardCase(testDescription: "every file gone, the directories left (an emptied disk)",
                  totals: totals(before: (1_600, 1_500), deleted: (1_500, 1_500)), confirmed: false,
                  refusal: .allFilesDeleted(count: 1_500)),
        GuardCase(testDescription: "every file gone, confirmed by the user",
                  totals: totals(before: (1_600, 1_500), deleted: (1_600, 1_500)), confirmed: true, refusal: nil),
        GuardCase(testDescription: "all but one file gone",
                  totals: totals(before: (1_500, 1_500), deleted: (1_499, 1_499)), confirmed: false, refusal: nil),
        GuardCase(testDescription: "everything moved into a new folder (new files added first)",
                  totals: totals(before: (1_500, 1_500), after: (3_001, 3_000), deleted: (1_500, 1_500)), confirmed: false, refusal: nil),
        GuardCase(testDescription: "a small folder may be emptied",
                  totals: totals(before: (9, 9), deleted: (9, 9)), confirmed: false, refusal: nil),
        GuardCase(testDescription: "ten entries is not small",
                  totals: totals(before: (10, 10), deleted: (10, 10)), confirmed: false, refusal: .everythingDeleted(count: 10)),
        GuardCase(testDescription: "only empty folders, all removed",
                  totals: totals(before: (12, 0), deleted: (12, 0)), confirmed: false, refusal: .everythingDeleted(count: 12)),
        GuardCase(testDescription: "some empty folders removed, files stay",
                  totals: totals(before: (12, 2), deleted: (10, 0)), confirmed: false, refusal: nil),
        GuardCase(testDescription: "a scan with no deletion", totals: totals(before: (1_500, 1_500), deleted: (0, 0)),
                  confirmed: false, refusal: nil),
    ])
    func massDeletionGuardJudgesTheWholeScan(_ c: GuardCase) {
        #expect(MassDeletionGuard.check(c.totals, allowDeletingEverything: c.confirmed) == c.refusal)
    }

    @Test func aMissingRootRefusesEveryRecord() {
        let missing = LocalScanResult(rootPresent: false, present: [], deleted: ["a", "b"])
        let old = ["a": file("a", vv([devA: 1])), "b": file("b", vv([devA: 1]))]
        #expect(changes.records(for: missing, old: { old[$0] }, deletedAtNs: t0) == .failure(.rootMissing))
        #expect(MassDeletionGuard.Refusal.rootMissing.description.contains("root is missing"))
        #expect(MassDeletionGuard.Refusal.allFilesDeleted(count: 3).description.contains("all 3 files gone"))
    }
}

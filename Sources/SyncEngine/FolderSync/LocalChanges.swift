package import PeerModel

/// What a local scan (or a batch of watcher events) reports for a folder.
package struct LocalScanResult: Sendable, Equatable {
    /// Whether the folder root was there (a missing root means an unmounted disk or a
    /// moved folder, never "the user deleted everything").
    package var rootPresent: Bool
    /// Paths found, added or possibly changed (unchanged ones are allowed and ignored): what
    /// the disk shows (no version yet; fields that do not apply to the kind are ignored).
    package var present: [FileEntry]
    /// Paths the index has that are gone from disk.
    package var deleted: [String]

    package init(rootPresent: Bool, present: [FileEntry] = [], deleted: [String] = []) {
        self.rootPresent = rootPresent
        self.present = present
        self.deleted = deleted
    }
}

/// What a whole scan (not one of its batches) would leave in the folder: what the
/// mass-deletion guard judges. A scan records its additions and changes as it goes and
/// holds its deletions back until it has seen everything.
package struct ScanTotals: Sendable, Equatable {
    /// Live entries of every kind in the index when the scan started.
    package var entriesBefore: Int
    /// Live files in the index when the scan started.
    package var filesBefore: Int
    /// Live entries once the scan's additions and changes are recorded (before its deletions).
    package var entriesAfterAdditions: Int
    /// Live files once the scan's additions and changes are recorded (before its deletions).
    package var filesAfterAdditions: Int
    /// Deletions the scan found, and how many of them are files.
    package var deletedEntries: Int
    package var deletedFiles: Int

    package init(entriesBefore: Int, filesBefore: Int, entriesAfterAdditions: Int, filesAfterAdditions: Int,
                deletedEntries: Int, deletedFiles: Int) {
        self.entriesBefore = entriesBefore
        self.filesBefore = filesBefore
        self.entriesAfterAdditions = entriesAfterAdditions
        self.filesAfterAdditions = filesAfterAdditions
        self.deletedEntries = deletedEntries
        self.deletedFiles = deletedFiles
    }
}

/// Refuses to turn a scan into deletions when the scan cannot be trusted.
///
/// The rule, on the whole scan: a folder that had at least `minimumEntries` live entries
/// is never emptied by a scan — neither left with no entry at all, nor left with no file
/// when it had files (an emptied disk often keeps its directories). That is what an
/// unmounted disk, a wiped root or a half-restored backup look like, and almost never
/// what a user means without saying so: they confirm it (`syncpeer confirm DIR`). A
/// smaller folder may be emptied freely, and any deletion that leaves a file in place
/// propagates as usual.
package enum MassDeletionGuard {
    /// Folders with fewer live entries may be emptied without confirmation.
    package static let minimumEntries = 10

    /// Why a scan's changes were not applied.
    package enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// The folder root is missing: nothing is recorded or sent; the folder stops with this error.
        case rootMissing
        /// The scan deletes every one of `count` live entries.
        case everythingDeleted(count: Int)
        /// The scan deletes `count` files, every file the folder had.
        case allFilesDeleted(count: Int)

        package var description: String {
            switch self {
            case .rootMissing:
                "the folder root is missing (unmounted disk or moved folder); syncing stopped so that nothing is deleted on other devices"
            case .everythingDeleted(let count):
                "the scan found all \(count) files and folders gone at once; syncing stopped so that nothing is deleted on other devices"
            case .allFilesDeleted(let count):
                "the scan found all \(count) files gone at once; syncing stopped so that nothing is deleted on other devices"
            }
        }
    }

    /// Checks what a whole scan would leave. nil: its deletions may be recorded and sent.
    package static func check(_ totals: ScanTotals, minimumEntries: Int = MassDeletionGuard.minimumEntries,
                             allowDeletingEverything: Bool = false) -> Refusal? {
        guard totals.deletedEntries > 0, !allowDeletingEverything, totals.entriesBefore >= minimumEntries else { return nil }
        if totals.entriesAfterAdditions - totals.deletedEntries <= 0 { return .everythingDeleted(count: totals.deletedEntries) }
        if totals.filesBefore > 0, totals.filesAfterAdditions - totals.deletedFiles <= 0 {
            return .allFilesDeleted(count: totals.deletedFiles)
        }
        return nil
    }
}

/// Turns what a scan found into new local records: each change increments our counter
/// in the path's version vector; a deletion becomes a tombstone that keeps the version
/// history; an unchanged path produces nothing (it keeps its version and sequence).
package struct LocalChanges: Sendable {
    /// Our device ID: the key our changes count under.
    package let localDevice: String
    /// Lower bound for our new counters (e.g. unix seconds of the scan), so a device that
    /// lost its index never reuses a counter; 0 for plain increments.
    package let counterFloor: UInt64

    package init(localDevice: String, counterFloor: UInt64 = 0) {
        self.localDevice = localDevice
        self.counterFloor = counterFloor
    }

    /// The records to write, in path order (sequence 0: the index assigns them); refused
    /// when the root was missing. `old` gives the current local record of a path.
    /// `deletedAtNs` is the time recorded as the mtime of new tombstones. (Mass deletion is
    /// judged on the whole scan, before its deletions come here: `MassDeletionGuard`.)
    package func records(for scan: LocalScanResult, old: (String) -> FileEntry?,
                        deletedAtNs: Int64) -> Result<[FileEntry], MassDeletionGuard.Refusal> {
        guard scan.rootPresent else { return .failure(.rootMissing) }
        var result: [FileEntry] = []
        for entry in scan.present {
            if let record = record(for: entry, old: old(entry.path)) { result.append(record) }
        }
        for path in scan.deleted {
            if let old = old(path), let tombstone = tombstone(for: old, deletedAtNs: deletedAtNs) { result.append(tombstone) }
        }
        return .success(result.sorted { $0.path < $1.path })
    }

    /// The new record for a path found on disk, or nil when it matches `old` (unchanged).
    package func record(for entry: FileEntry, old: FileEntry?) -> FileEntry? {
        var new = entry
        if entry.kind != .file { (new.size, new.rootHash) = (0, nil) }
        if entry.kind != .symlink { new.symlinkTarget = nil }
        (new.deleted, new.version, new.modifiedBy, new.sequence) = (false, VersionVector(), localDevice, 0)
        if let old, !old.deleted, old.hasSameContent(as: new), old.mode == new.mode,
           old.kind == .directory || old.mtimeNs == new.mtimeNs {
            return nil // unchanged (a directory's mtime changes with its children: not a change of its own)
        }
        var record = new
        record.version = (old?.version ?? VersionVector()).incremented(for: localDevice, minimum: counterFloor)
        return record
    }

    /// The tombstone for a path that disappeared, or nil when `old` already is one.
    package func tombstone(for old: FileEntry, deletedAtNs: Int64) -> FileEntry? {
        guard !old.deleted else { return nil }
        return FileEntry(path: old.path, kind: old.kind, size: 0, mtimeNs: deletedAtNs, mode: old.mode, deleted: true,
                         version: old.version.incremented(for: localDevice, minimum: counterFloor),
                         modifiedBy: localDevice)
    }
}

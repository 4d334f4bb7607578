/// One path as a scan found it on disk (what changed is decided against the old record).
public struct ScannedEntry: Sendable, Hashable {
    public var path: String
    public var kind: FileState.Kind
    public var size: Int64
    public var mtimeNs: Int64
    public var mode: UInt32
    public var symlinkTarget: String?
    /// Root hash of the content manifest; nil for directories and symlinks.
    public var rootHash: [UInt8]?

    public init(path: String, kind: FileState.Kind, size: Int64 = 0, mtimeNs: Int64, mode: UInt32,
                symlinkTarget: String? = nil, rootHash: [UInt8]? = nil) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtimeNs = mtimeNs
        self.mode = mode
        self.symlinkTarget = symlinkTarget
        self.rootHash = rootHash
    }
}

/// What a local scan (or a batch of watcher events) reports for a folder.
public struct LocalScanResult: Sendable, Equatable {
    /// Whether the folder root was there (a missing root means an unmounted disk or a
    /// moved folder, never "the user deleted everything").
    public var rootPresent: Bool
    /// Paths found, added or possibly changed (unchanged ones are allowed and ignored).
    public var present: [ScannedEntry]
    /// Paths the index has that are gone from disk.
    public var deleted: [String]

    public init(rootPresent: Bool, present: [ScannedEntry] = [], deleted: [String] = []) {
        self.rootPresent = rootPresent
        self.present = present
        self.deleted = deleted
    }
}

/// What a whole scan (not one of its batches) would leave in the folder: what the
/// mass-deletion guard judges. A scan records its additions and changes as it goes and
/// holds its deletions back until it has seen everything.
public struct ScanTotals: Sendable, Equatable {
    /// Live entries of every kind in the index when the scan started.
    public var entriesBefore: Int
    /// Live files in the index when the scan started.
    public var filesBefore: Int
    /// Live entries once the scan's additions and changes are recorded (before its deletions).
    public var entriesAfterAdditions: Int
    /// Live files once the scan's additions and changes are recorded (before its deletions).
    public var filesAfterAdditions: Int
    /// Deletions the scan found, and how many of them are files.
    public var deletedEntries: Int
    public var deletedFiles: Int

    public init(entriesBefore: Int, filesBefore: Int, entriesAfterAdditions: Int, filesAfterAdditions: Int,
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
public enum MassDeletionGuard {
    /// Folders with fewer live entries may be emptied without confirmation.
    public static let minimumEntries = 10

    /// Why a scan's changes were not applied.
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// The folder root is missing: nothing is recorded or sent; the folder stops with this error.
        case rootMissing
        /// The scan deletes every one of `count` live entries.
        case everythingDeleted(count: Int)
        /// The scan deletes `count` files, every file the folder had.
        case allFilesDeleted(count: Int)

        public var description: String {
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
    public static func check(_ totals: ScanTotals, minimumEntries: Int = MassDeletionGuard.minimumEntries,
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
public struct LocalChanges: Sendable {
    /// Our device ID: the key our changes count under.
    public let localDevice: String
    /// Lower bound for our new counters (e.g. unix seconds of the scan), so a device that
    /// lost its index never reuses a counter; 0 for plain increments.
    public let counterFloor: UInt64

    public init(localDevice: String, counterFloor: UInt64 = 0) {
        self.localDevice = localDevice
        self.counterFloor = counterFloor
    }

    /// The records to write, in path order (sequence 0: the index assigns them); refused
    /// when the root was missing. `old` gives the current local record of a path.
    /// `deletedAtNs` is the time recorded as the mtime of new tombstones. (Mass deletion is
    /// judged on the whole scan, before its deletions come here: `MassDeletionGuard`.)
    public func records(for scan: LocalScanResult, old: (String) -> FileState?,
                        deletedAtNs: Int64) -> Result<[FileState], MassDeletionGuard.Refusal> {
        guard scan.rootPresent else { return .failure(.rootMissing) }
        var result: [FileState] = []
        for entry in scan.present {
            if let record = record(for: entry, old: old(entry.path)) { result.append(record) }
        }
        for path in scan.deleted {
            if let old = old(path), let tombstone = tombstone(for: old, deletedAtNs: deletedAtNs) { result.append(tombstone) }
        }
        return .success(result.sorted { $0.path < $1.path })
    }

    /// The new record for a path found on disk, or nil when it matches `old` (unchanged).
    public func record(for entry: ScannedEntry, old: FileState?) -> FileState? {
        let new = FileState(path: entry.path, kind: entry.kind, size: entry.kind == .file ? entry.size : 0,
                            mtimeNs: entry.mtimeNs, mode: entry.mode,
                            symlinkTarget: entry.kind == .symlink ? entry.symlinkTarget : nil,
                            version: VersionVector(), rootHash: entry.kind == .file ? entry.rootHash : nil,
                            modifiedBy: localDevice)
        if let old, !old.deleted, old.hasSameContent(as: new), old.mode == new.mode,
           old.kind == .directory || old.mtimeNs == new.mtimeNs {
            return nil // unchanged (a directory's mtime changes with its children: not a change of its own)
        }
        var record = new
        record.version = (old?.version ?? VersionVector()).incremented(for: localDevice, minimum: counterFloor)
        return record
    }

    /// The tombstone for a path that disappeared, or nil when `old` already is one.
    public func tombstone(for old: FileState, deletedAtNs: Int64) -> FileState? {
        guard !old.deleted else { return nil }
        return FileState(path: old.path, kind: old.kind, size: 0, mtimeNs: deletedAtNs, mode: old.mode, deleted: true,
                         version: old.version.incremented(for: localDevice, minimum: counterFloor),
                         modifiedBy: localDevice)
    }
}

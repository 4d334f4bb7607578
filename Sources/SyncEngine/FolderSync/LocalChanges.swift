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

/// Refuses to turn a scan into deletions when the scan cannot be trusted.
public enum MassDeletionGuard {
    /// Why a scan's changes were not applied.
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// The folder root is missing: nothing is recorded or sent; the folder stops with this error.
        case rootMissing
        /// The scan deletes every one of `count` live entries at once (an empty mount
        /// point looks like that); applied only when explicitly allowed.
        case everythingDeleted(count: Int)

        public var description: String {
            switch self {
            case .rootMissing:
                "the folder root is missing (unmounted disk or moved folder); syncing stopped so that nothing is deleted on other devices"
            case .everythingDeleted(let count):
                "the scan found all \(count) files and folders gone at once; syncing stopped so that nothing is deleted on other devices (confirm to propagate the deletion)"
            }
        }
    }

    /// Checks a scan against the number of live entries the index has for the folder.
    /// `.rootMissing` whenever the root is gone; `.everythingDeleted` when at least
    /// `minimumLiveForEmptyCheck` live entries would all be deleted and nothing is
    /// present, unless `allowDeletingEverything`.
    public static func check(_ scan: LocalScanResult, liveEntriesBefore: Int, minimumLiveForEmptyCheck: Int = 10,
                             allowDeletingEverything: Bool = false) -> Refusal? {
        guard scan.rootPresent else { return .rootMissing }
        if !allowDeletingEverything, liveEntriesBefore >= minimumLiveForEmptyCheck, scan.present.isEmpty,
           scan.deleted.count >= liveEntriesBefore {
            return .everythingDeleted(count: liveEntriesBefore)
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

    /// The records to write, in path order (sequence 0: the index assigns them), after
    /// the mass-deletion guard. `old` gives the current local record of a path.
    /// `deletedAtNs` is the time recorded as the mtime of new tombstones.
    public func records(for scan: LocalScanResult, old: (String) -> FileState?, liveEntriesBefore: Int,
                        deletedAtNs: Int64, allowDeletingEverything: Bool = false) -> Result<[FileState], MassDeletionGuard.Refusal> {
        if let refusal = MassDeletionGuard.check(scan, liveEntriesBefore: liveEntriesBefore,
                                                 allowDeletingEverything: allowDeletingEverything) {
            return .failure(refusal)
        }
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

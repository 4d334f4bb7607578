/// `history`: the versions of a path (or of every path under a folder path) known on this
/// node and on the connected members of its folder, newest first.
public struct HistoryResult: Sendable, Equatable, Codable {
    /// One version, as one device holds (or knows) it.
    public struct Version: Sendable, Equatable, Codable {
        /// What `restore --version` takes: the holder's short ID, "-", its number there.
        public var id: String
        /// Path relative to the folder root.
        public var path: String
        /// The device that keeps (or knows) it: its short ID and name.
        public var device: String
        public var deviceName: String
        /// True for this node's own versions.
        public var local: Bool
        /// When it was replaced (unix ms).
        public var keptAt: Int64
        public var size: Int64
        /// Its modification time (unix ms).
        public var mtime: Int64
        /// Who wrote it: short ID (and name when known).
        public var changedBy: String
        public var changedByName: String?
        /// What replaced it: peer-edit, peer-delete, local-edit, local-delete, conflict, verify, restore.
        public var reason: String
        /// Whether that device holds its content (false: known there, content elsewhere or lost).
        public var held: Bool
        /// Root hash of the content (hex): the same content held on several devices has one.
        public var content: String
    }

    public var folder: String
    /// The path asked for (absolute).
    public var path: String
    public var versions: [Version]
    /// Connected members asked, and how many answered.
    public var peersAsked: Int
    public var peersAnswered: Int
    /// True when a list stopped at its bound (`HistoryResult.limit`): ask for a narrower path.
    public var truncated: Bool

    /// Most versions listed from each device.
    public static let limit = 1_000
}

/// `restore`: what came back, where to, and from which device.
public struct RestoreResult: Sendable, Equatable, Codable {
    public struct Restored: Sendable, Equatable, Codable {
        /// Where it was written (absolute).
        public var path: String
        /// The version (`HistoryResult.Version.id`) and the device its chunks came from
        /// ("local" when all were in this node's store).
        public var version: String
        public var from: String
        public var bytes: Int64
    }
    public struct Failed: Sendable, Equatable, Codable {
        public var path: String
        public var reason: String
    }

    public var folder: String
    public var restored: [Restored]
    public var failed: [Failed]

    /// Most files one restore brings back.
    public static let limit = 10_000
}

/// `versions`: a folder's policy for the versions it keeps, and what they take.
public struct VersionsPolicyResult: Sendable, Equatable, Codable {
    public var folder: String
    public var path: String
    /// The policy as text (`VersionPolicy`), e.g. "staggered 30 cap 10%".
    public var policy: String
    /// Versions kept now in the folder, and the bytes of the node's store (all folders).
    public var versions: Int
    public var storeBytes: Int64
}

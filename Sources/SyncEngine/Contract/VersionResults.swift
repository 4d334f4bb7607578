/// `history`: the versions of a path (or of every path under a folder path) known on this
/// node and on the connected members of its folder, newest first.
package struct HistoryResult: Sendable, Equatable, Codable {
    /// One version, as one device holds (or knows) it.
    package struct Version: Sendable, Equatable, Codable {
        /// What `restore --version` takes: the holder's short ID, "-", its number there.
        package var id: String
        /// Path relative to the folder root.
        package var path: String
        /// The device that keeps (or knows) it: its short ID and name.
        package var device: String
        package var deviceName: String
        /// True for this node's own versions.
        package var local: Bool
        /// When it was replaced (unix ms).
        package var keptAt: Int64
        package var size: Int64
        /// Its modification time (unix ms).
        package var mtime: Int64
        /// Who wrote it: short ID (and name when known).
        package var changedBy: String
        package var changedByName: String?
        /// What replaced it: peer-edit, peer-delete, local-edit, local-delete, conflict, verify, restore.
        package var reason: String
        /// Whether that device holds its content (false: known there, content elsewhere or lost).
        package var held: Bool
        /// Root hash of the content (hex): the same content held on several devices has one.
        package var content: String
    }

    package var folder: String
    /// The path asked for (absolute).
    package var path: String
    package var versions: [Version]
    /// Connected members asked, and how many answered.
    package var peersAsked: Int
    package var peersAnswered: Int
    /// True when a list stopped at its bound (`HistoryResult.limit`): ask for a narrower path.
    package var truncated: Bool

    /// Most versions listed from each device.
    package static let limit = 1_000
}

/// `restore`: what came back, where to, and from which device.
package struct RestoreResult: Sendable, Equatable, Codable {
    package struct Restored: Sendable, Equatable, Codable {
        /// Where it was written (absolute).
        package var path: String
        /// The version (`HistoryResult.Version.id`) and the device its chunks came from
        /// ("local" when all were in this node's store).
        package var version: String
        package var from: String
        package var bytes: Int64
    }
    package struct Failed: Sendable, Equatable, Codable {
        package var path: String
        package var reason: String
    }

    package var folder: String
    package var restored: [Restored]
    package var failed: [Failed]

    /// Most files one restore brings back.
    package static let limit = 10_000
}

/// `versions`: a folder's policy for the versions it keeps, and what they take.
package struct VersionsPolicyResult: Sendable, Equatable, Codable {
    package var folder: String
    package var path: String
    /// The policy as text (`VersionPolicy`), e.g. "staggered 30 cap 10%".
    package var policy: String
    /// Versions kept now in the folder, and the bytes of the node's store (all folders).
    package var versions: Int
    package var storeBytes: Int64
}

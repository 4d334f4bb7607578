public import Foundation
internal import SyncEngine

/// A conflicted file of a shared folder and every version of it (`Session.conflicts`).
public struct Conflict: Sendable, Equatable {
    /// The folder's label.
    public let folder: String
    /// The file (absolute path).
    public let original: String
    /// The file itself (if it exists), then its conflict copies, oldest first (at most 100).
    public let versions: [Version]
    /// Versions past those listed.
    public let moreVersions: Int

    public struct Version: Sendable, Equatable {
        /// Where it is (absolute): the file itself or a conflict copy.
        public let path: String
        /// The name of the device that wrote it ("?" when unknown).
        public let deviceName: String
        /// Whether this node wrote it.
        public let isLocal: Bool
        public let size: Int64
        public let modified: Date
    }

    init(_ info: ConflictInfo) {
        folder = info.folder
        original = info.original
        moreVersions = info.moreVersions ?? 0
        versions = info.versions.map {
            Version(path: $0.path, deviceName: $0.name, isLocal: $0.local, size: $0.size,
                    modified: Date(timeIntervalSince1970: Double($0.time) / 1000))
        }
    }
}

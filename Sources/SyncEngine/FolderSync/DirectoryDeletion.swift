package import PeerModel

/// What becomes of a directory that a peer deleted but that is not empty here. Pure: the
/// applier supplies what the directory holds and what the deleting peer knows of it.
///
/// A peer deletes a directory only after deleting everything it held, so an entry still
/// inside it here is either one the peer's deletion covers (its tombstone has not reached us
/// yet, or is being applied) or one the peer never saw: an edit made here concurrently (bob
/// edits `sub/f.txt` while carol moves `sub` away) or an entry created here. Such an entry
/// survives (delete-vs-modify: the edit wins), and so must its directory: it is kept and
/// recorded live again, with a change of ours on top of the deletion, so that it comes back
/// on every node with what it holds. Without that, the directory's record stays dominated by
/// the deletion here (the delete is planned again and again) while the peers that pull the
/// surviving entry hold a directory their index says is deleted: nobody converges.
package enum DirectoryDeletion: Sendable, Equatable {
    /// Keep the directory and record `FileEntry` (live, dominating the deletion).
    case keep(FileEntry)
    /// What it holds is covered by the deletion but not deleted here yet: try again later.
    case wait

    /// One entry found inside the directory on disk.
    package struct Child: Sendable, Equatable {
        /// The local record of the entry; nil when it is not recorded (new, not scanned yet).
        package var local: FileEntry?
        /// The deleting peer's state of the entry; nil when that peer never had it.
        package var deleter: FileEntry?

        package init(local: FileEntry?, deleter: FileEntry?) {
            self.local = local
            self.deleter = deleter
        }
    }

    /// Decides for the directory whose local record is `local` (live, or nil), deleted by a
    /// peer with `tombstone`, holding `children`; `device` is our device ID, `mtimeNs` and
    /// `mode` what the directory has on disk.
    package static func decide(local: FileEntry?, tombstone: FileEntry, children: [Child], device: String,
                              mtimeNs: Int64, mode: UInt32) -> DirectoryDeletion {
        guard children.contains(where: survives) else { return .wait }
        let seen = tombstone.version.merged(with: local?.version ?? VersionVector())
        return .keep(FileEntry(path: tombstone.path, kind: .directory, mtimeNs: mtimeNs, mode: mode,
                               version: seen.incremented(for: device), modifiedBy: device))
    }

    /// An entry the deletion does not cover: not recorded here yet, recorded as deleted while
    /// it is on disk (it came back), unknown to the deleting peer, or with a version of ours
    /// that the deleting peer has not seen (equal or older there: covered).
    static func survives(_ child: Child) -> Bool {
        guard let local = child.local, !local.deleted, let deleter = child.deleter else { return true }
        switch deleter.version.compare(local.version) {
        case .equal, .greater: return false
        case .lesser, .concurrent: return true
        }
    }
}

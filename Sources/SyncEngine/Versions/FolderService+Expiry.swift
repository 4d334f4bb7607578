#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials

/// Expiry of kept versions in the background: every `expiryInterval`, and soon after a
/// policy changes, each folder's policy is applied (`VersionKeeper.expire`) on a utility
/// queue of its own, never on the node's.
extension FolderService {
    static let expiryInterval: DispatchTimeInterval = .seconds(600)
    static let expiryQueue = DispatchQueue(label: "syncpeer.versions.expiry", qos: .utility)

    /// Starts the periodic expiry (the node calls it once, when it starts), first tidying
    /// the packs a crash left (`VersionKeeper.tidyPacks`).
    func startVersionExpiry() {
        if let versions { Self.expiryQueue.async { versions.tidyPacks() } }
        scheduleVersionExpiry()
    }

    private func scheduleVersionExpiry() {
        Self.expiryQueue.asyncAfter(deadline: .now() + Self.expiryInterval) { [weak self] in
            guard let self else { return }
            expireVersionsNow()
            scheduleVersionExpiry()
        }
    }

    /// Applies every folder's policy soon (after a policy change).
    func expireVersionsSoon() {
        Self.expiryQueue.async { [weak self] in self?.expireVersionsNow() }
    }

    /// Applies every folder's policy now (on `expiryQueue`).
    func expireVersionsNow() {
        guard let versions else { return }
        let ids = sharedFolders().map(\.id)
        var fs = statvfs()
        let fileSystemBytes = statvfs(versions.store.root + "/..", &fs) == 0 ? Int64(fs.f_blocks) * Int64(fs.f_frsize) : Int64.max
        for id in ids { versions.expire(folderID: id, now: versions.clock(), fileSystemBytes: fileSystemBytes) }
    }
}

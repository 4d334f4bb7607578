internal import Dispatch
internal import FoundationEssentials
internal import PeerIndex
internal import Synchronization

extension FolderService {
    /// `syncpeer pause DIR` / `resume-folder DIR`: a paused folder is neither scanned nor
    /// pulled (what peers send is recorded, not applied); it stays paused across restarts
    /// (an index setting). Resuming scans it and pulls everything it missed.
    func setPaused(directory: String, _ on: Bool) throws(EngineError) -> FolderResult {
        let folder = try sharedFolder(at: directory)
        do { try index.setSetting(SharedFolder.pausedSetting(folder.id), on ? "1" : nil) } catch { throw .index(error) }
        folder.paused.store(on, ordering: .relaxed)
        if on {
            folder.heldRulesChanged()  // nothing more served of what it fetches
            folder.setStatus(.idle)  // shown as paused
        } else {
            folder.io.async {
                folder.fullScan()
                folder.pull(paths: nil)
                folder.setStatus(.idle)
            }
        }
        return FolderResult(folder: folder.id, path: folder.root, paused: on)
    }
}

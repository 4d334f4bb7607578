internal import Foundation
internal import PeerIndex

extension Node {
    /// `syncpeer confirm DIR`: the user says the folder is as they want it — its root (even
    /// a moved, re-created or emptied one) is adopted as it is now, and the deletions the
    /// next scan finds are recorded and sent even if they empty it. Then it syncs again.
    public func confirmFolder(directory: String) throws(EngineError) -> JSONValue {
        let path = URL(fileURLWithPath: directory).standardizedFileURL.path
        let folder: SharedFolder? = queue.sync { folderTable.folders.values.first { $0.root == path } }
        guard let folder else { throw .notFound("\(directory) is not shared; see 'syncpeer status'") }
        let result: Result<JSONValue, EngineError> = folder.io.sync { folder.confirm() }
        return try result.get()
    }
}

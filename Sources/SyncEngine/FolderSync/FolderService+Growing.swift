internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// Growing files (`GrowingFiles`, `Prefetches`): what our scans hash goes to the members that
/// take it while it is hashed, and what theirs hash comes in.
extension FolderService {
    /// The hello feature of a node that takes `growingFile` frames (and serves what it announces).
    static let growingFilesFeature = "growing-files"

    /// Sends `note` to every connected member of `folder` whose hello lists `growing-files`
    /// and to which our changes go (not receive-only); any thread (the scan's).
    func announceGrowing(_ folder: SharedFolder, _ note: GrowingFiles.Note) {
        if !note.chunks.isEmpty, !folder.servesHeld(note.path) { return }
        let frame = Frame.growingFile(folder: folder.id, path: note.path, scan: note.scan, size: note.size, offset: note.offset,
                                      chunks: note.chunks.map { GrowingChunk(size: $0.size, hash: $0.hash.bytes) })
        guard (try? frame.validate()) != nil else { return }
        queue.async { [self] in
            let roles = (try? index.folderPeerRoles(folderID: folder.id)) ?? [:]
            for session in connectedMembers(of: folder.id) where session.growingFiles
            && roles[session.deviceKey].map({ PeerPolicy($0).role != .receiveOnly }) ?? true {
                link?.send([frame], on: session.id)
            }
        }
    }

    /// A member's `growingFile` (on `queue`): fetched ahead, only from a member of a folder we have.
    func growingFileReceived(_ folderID: String, path: String, scan: UInt64, size: UInt64, offset: UInt64,
                             chunks: [GrowingChunk], from session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let folder = state.withLock({ $0.folders[folderID] }), isMember(session.deviceKey, of: folderID) else { return }
        var refs: [ChunkRef] = []
        refs.reserveCapacity(chunks.count)
        var at = offset
        for chunk in chunks {
            guard let hash = ChunkHash(bytes: chunk.hash) else { return }
            refs.append(ChunkRef(offset: at, size: chunk.size, hash: hash))
            at += UInt64(chunk.size)
        }
        folder.growingAnnounced(from: session.deviceKey, path: path, scan: scan, size: size, offset: offset, chunks: refs)
    }
}

extension FolderHost {
    /// Hosts without sessions announce nothing.
    func announceGrowing(_ folder: SharedFolder, _ note: GrowingFiles.Note) {}
}

internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// Serving blocks to members, and the index quota of each member.
extension FolderService {
    // MARK: - Serving blocks

    /// Serves a member's block request on the folder's serve queue. At most
    /// `SessionFlow.serveBudget` bytes of answers are prepared at once per session; later
    /// requests wait here in order (and count as unhandled, so the reader stops reading the
    /// peer). The answer's bytes count in the session's flow until they are written.
    func serveBlock(_ frame: Frame, from folder: SharedFolder, to session: LinkSession) {
        guard case let .blockRequest(_, _, _, _, size, _) = frame else { return }
        if !(folderTable.parked[session.id] ?? []).isEmpty || !session.flow.reserve(Self.serveCost(size)) {
            folderTable.parked[session.id, default: []].append((frame, folder))
            session.flow.received(0)
            return
        }
        startServe(frame, from: folder, to: session)
    }

    private static func serveCost(_ size: UInt32) -> Int { Int(size) + 64 }

    /// Reads and sends one answer; its cost is already reserved.
    private func startServe(_ frame: Frame, from folder: SharedFolder, to session: LinkSession) {
        guard case let .blockRequest(request, _, path, offset, size, hash) = frame else { return }
        let device = session.deviceKey
        folder.serveQueue.async { [self] in
            let refused: Bool
            switch folder.blockSource(path: path, offset: offset, size: size, hash: hash) {
            case let .file(reader, chunk):
                // Read from the file straight into the channel's buffer when the answer's turn
                // comes (A-share profile: the block array, the frame encoding and the plaintext
                // buffer were three copies of every served byte). The reader holds the file
                // open: a file replaced since is still read as indexed; one written in place
                // meanwhile gives bytes the asker's hash check refuses.
                folder.activity.served(to: device, bytes: Int(chunk.size))
                let source = HandedOver(reader: reader)
                session.frames.sendBlockFromAnyThread(request: request, count: Int(chunk.size)) { buffer, offset throws(FileError) in
                    try source.reader.read(at: chunk.offset + UInt64(offset), into: buffer)
                }
                refused = false
            case let .answer(.data(bytes)):
                folder.activity.served(to: device, bytes: bytes.count)
                session.frames.sendFromAnyThread([.blockResponse(request: request, ok: true, data: bytes)])
                refused = false
            case let .answer(answer):
                session.frames.sendFromAnyThread([.blockResponse(request: request, ok: false, data: [])])
                refused = answer == .notShared
            }
            // Queued: the send queue's count holds the answer from here.
            session.flow.release(Self.serveCost(size))
            queue.async { [self] in
                if refused { blockRefused(to: session, folder: folder) }
                resumeServing(session)
            }
        }
    }

    /// Starts the waiting requests that fit the budget now.
    private func resumeServing(_ session: LinkSession) {
        while let (frame, folder) = folderTable.parked[session.id]?.first {
            guard link?.session(session.id) != nil else { return }
            guard case let .blockRequest(_, _, _, _, size, _) = frame, session.flow.reserve(Self.serveCost(size)) else { return }
            folderTable.parked[session.id]?.removeFirst()
            session.flow.handled(0)
            startServe(frame, from: folder, to: session)
        }
    }
}

/// A reader handed from the serve queue to the session's send queue: only the send queue
/// uses it from then on, and only `read(at:into:)`, which touches nothing but the descriptor.
private struct HandedOver: @unchecked Sendable {
    let reader: ChunkReader
}

// MARK: - Index quota

extension FolderService {
    /// The most index entries (tombstones included) stored for one peer in one folder:
    /// twice our own entries (a member may hold all we hold, and as much again that we have
    /// not pulled yet) plus `config.peerIndexAllowance` (a folder we just joined is empty
    /// here). Beyond it one member could grow the index on disk and the planner's memory
    /// without end (1,000,000 tombstones: 472 MB of index). "Our own" leaves out the
    /// tombstones we recorded for other devices' deletions: applying a member's flood of
    /// deletions must not raise that member's quota.
    func indexQuota(folderID: String) throws(IndexError) -> Int {
        2 * (try index.ownEntryCount(folderID: folderID, localDevice: localDevice)) + config.peerIndexAllowance
    }

    /// Whether storing `records` keeps the peer within its quota; if not, says so once per
    /// session (an error event and the folder's status, naming the peer) and the caller
    /// refuses the batch (no ack: an honest peer sends it again later).
    func withinIndexQuota(_ records: [RemoteFileRecord], folder: SharedFolder, from session: LinkSession) -> Bool {
        let paths = Set(records.map(\.path))
        let after: Int
        let quota: Int
        do {
            let counts = try index.remoteFileCounts(folderID: folder.id, deviceID: session.deviceKey, paths: Array(paths))
            after = counts.stored + paths.count - counts.existing
            quota = try indexQuota(folderID: folder.id)
        } catch {
            emitError(session.peer, "folder \(folder.label): cannot check \(session.peer.name)'s index quota: \(error)")
            return false
        }
        guard after > quota else { return true }
        if folderTable.quotaReported[session.id, default: []].insert(folder.id).inserted {
            let message = "folder \(folder.label): \(session.peer.name) (\(session.peer.id)) sent more index entries than it may "
                + "store (\(after) > \(quota): twice ours plus \(config.peerIndexAllowance)); its further entries are refused"
            emitError(session.peer, message)
            folder.setError(message)
        }
        return false
    }
}

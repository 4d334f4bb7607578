internal import Dispatch
internal import PeerFiles
internal import PeerWire
internal import Synchronization

/// Blocks asked of members for the folders' pulls, their answers settled in `frameReceived`.
extension FolderService {
    /// Asks peers for blocks (each as a delta against its `sums` when the peer's hello lists
    /// `block-delta`): one hop to the node's queue and one send per peer for all of them
    /// (B asks for 10,000 blocks, 32 at a time). A request unanswered after `blockTimeout`
    /// gets nil (`sweepBlocksLater`).
    func requestBlocks(_ wants: [BlockWant]) {
        guard !wants.isEmpty else { return }
        queue.async { [self] in
            // The lock is taken twice for the whole batch (its request numbers, then its
            // pending entries): only `queue` numbers requests, so none comes in between.
            let (first, link) = state.withLock { ($0.nextRequest, $0.link) }
            var next = first
            var pending: [(request: UInt32, block: PendingBlock)] = []
            let deadline = ContinuousClock.now + Self.blockTimeout
            var frames: [(session: UInt64, frames: [Frame])] = []
            for want in wants {
                guard let session = link?.connectedSession(device: want.device) else {
                    want.callback(nil)
                    continue
                }
                let request = next
                let delta = session.blockDelta ? want.sums : nil
                let frame: Frame = if let delta {
                    .blockDeltaRequest(request: request, folder: want.folder, path: want.path, offset: want.offset, size: want.size,
                                       hash: want.hash, sums: delta)
                } else {
                    .blockRequest(request: request, folder: want.folder, path: want.path, offset: want.offset, size: want.size, hash: want.hash)
                }
                // Checked here: one invalid frame would make the channel refuse the whole send.
                guard (try? frame.validate()) != nil else {
                    want.callback(nil)
                    continue
                }
                next &+= 1
                let callback = want.callback
                // The most an answer may carry: the block, and a delta's bitmap.
                let limit = Int(want.size) + (delta == nil ? 0 : BlockDelta.bitmapSize(size: Int(want.size)))
                pending.append((request, (want.device, deadline, limit, { data in callback(data.map { delta == nil ? .whole($0) : .delta($0) }) })))
                if let at = frames.firstIndex(where: { $0.session == session.id }) { frames[at].frames.append(frame) } else {
                    frames.append((session.id, [frame]))
                }
            }
            let sweep = state.withLock { state in
                state.nextRequest = next
                for (request, block) in pending { state.pendingBlocks[request] = block }
                return state.startSweep()
            }
            for (session, list) in frames { link?.send(list, on: session) }
            if sweep { sweepBlocksLater() }
        }
    }

    /// Fails the block requests past their deadline a second from now, and again every
    /// second while any is pending (on `queue`, once `State.startSweep` says so): one timer
    /// for all of them, not one per request.
    private func sweepBlocksLater() {
        queue.asyncAfter(deadline: .now() + .seconds(1)) { [self] in
            let now = ContinuousClock.now
            let (expired, again) = state.withLock { state in
                state.sweeping = false
                let expired = state.pendingBlocks.filter { $0.value.deadline <= now }
                for request in expired.keys { state.pendingBlocks[request] = nil }
                return (expired.values.map(\.callback), state.startSweep())
            }
            for callback in expired { callback(nil) }
            if again { sweepBlocksLater() }
        }
    }
}

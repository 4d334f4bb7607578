internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// What one paired peer's offers waiting for an answer may make this node hold.
///
/// An offer the user has not answered yet (no auto-accept, no `receive` waiting) is kept
/// in memory with its decoded manifests until it is accepted, declined, or its session
/// ends (then it is withdrawn: the sender offers it again when it reconnects; unpairing
/// ends the session too). There is no timer: a user may answer hours later. Without a
/// bound, a peer sending offers of 12 MiB manifests made us hold 28 MiB each (150 of them
/// in 8 s: 4.2 GiB). Past either bound below, a new offer is declined at once, before its
/// manifests are decoded, with a reason the sender's `send` shows.
extension TransferService {
    /// Most offers from one peer waiting for an answer at once.
    static let maxPendingOffers = 16
    /// Most bytes that one peer's offers waiting for an answer may hold (`heldBytes`). The
    /// first is always held whatever its size (an offer is at most one 16 MiB frame: about
    /// 70 MiB held for 100,000 small files), so an honest large folder is never refused.
    static let maxPendingOfferBytes = 64 << 20
    /// What a pending offer holds per entry besides its path and chunks: the entry, its
    /// validated path, its decoded manifest's fixed part and its share of the transfer's
    /// bookkeeping (one offer of 100,000 one-chunk files held waiting: 68 MiB more resident,
    /// the session's read buffers included).
    static let pendingEntryCost = 512

    /// About what `offer` holds while it waits for an answer, from its encoding (before its
    /// manifests are decoded): each entry's fixed cost and path, and its decoded chunks
    /// (`ChunkRef`, 48 bytes, for every 36 bytes of manifest).
    static func heldBytes(of offer: TransferOffer) -> Int {
        let chunkRef = MemoryLayout<ChunkRef>.stride
        return offer.entries.reduce(4096 + offer.name.utf8.count) { total, entry in
            total + pendingEntryCost + entry.path.utf8.count + max(0, entry.manifest.count - 48) / 36 * chunkRef
        }
    }

    /// Why a new offer from `session`'s peer must be declined at once: its offers waiting
    /// for an answer already reach a bound. Nil when it may be held.
    /// (An offer that will not wait is not counted: one a `receive` or auto-accept takes at
    /// once, or one continuing a transfer accepted before, under its recorded ID.)
    func pendingOfferRefusal(_ offer: TransferOffer, from session: LinkSession) -> String? {
        guard transfers.receiveWaiters.isEmpty, !config.autoAccept else { return nil }
        let pending = transfers.incoming.values.filter { $0.peerKey == session.deviceKey && $0.state == .offered && !$0.resumed }
        guard !pending.isEmpty else { return nil }
        // Reads that fail count as "no": the offer is held to the bound (fails closed).
        if (try? store.peer(deviceID: session.deviceKey))?.autoAccept ?? false { return nil }
        // (Only an unfinished one is continued: a finished one's ID would wait as a new offer.)
        if let record = try? store.transfer(id: offer.id.description), record.deviceID == session.deviceKey,
           record.direction == .receive, record.state.isUnfinished { return nil }
        if pending.count >= Self.maxPendingOffers {
            return "refused: \(Self.maxPendingOffers) offers from you are already waiting for an answer here; "
                + "send it again once they are answered"
        }
        let held = pending.reduce(Self.heldBytes(of: offer)) { $0 + $1.heldBytes }
        if held > Self.maxPendingOfferBytes {
            return "refused: your offers waiting for an answer here would hold \(held >> 20) MiB "
                + "(at most \(Self.maxPendingOfferBytes >> 20) MiB); send it again once they are answered"
        }
        return nil
    }

    /// Reports offers declined for the bounds without flooding the events: the 1st, 10th,
    /// 100th, ... of a session.
    func pendingOfferRefused(_ reason: String, from session: LinkSession) {
        let sessionID = session.id
        let count = table { table in
            let count = (table.refusedOffers[sessionID] ?? 0) + 1
            table.refusedOffers[sessionID] = count
            return count
        }
        guard Self.isReported(count) else { return }
        emitError(session.peer, "refused an offer from \(session.peer.name) (\(count) refused in this session): \(reason)")
    }
}

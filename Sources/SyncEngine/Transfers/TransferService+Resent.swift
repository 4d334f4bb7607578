internal import PeerFiles
internal import PeerWire

/// "Re-sent" is one figure at both ends: the bytes of chunks the sender put on the wire more
/// than once (a chunk the receiver rejected, a chunk lost with a cut connection or a killed
/// receiver and asked for again). Only the sender knows what it put on the wire, so it
/// counts, and after each accept it tells the receiver (frame `resent`, hello feature
/// `resent-bytes`) what the attempt's figure will be once the chunks asked for have gone:
/// its re-sends so far plus the accepted chunks it had sent before. The receiver adds the
/// chunks that fail verification after that, which the sender counts as it sends them
/// again; when every chunk has arrived both ends hold the same number. From a sender
/// without the feature, the receiver counts the chunks it was sent twice.
extension TransferService {
    static let resentBytesFeature = "resent-bytes"

    /// After an accept that holds `have`: tells a receiver that takes it what this attempt's
    /// "re-sent" figure will be.
    func announceResent(_ transfer: OutgoingTransfer, have: Set<Int>, on session: LinkSession) {
        let (resent, everSent, layout) = transfer.with { t in
            t.resentBytes = t.resentBytes ?? 0
            return (t.resentBytes ?? 0, t.everSent, t.layout)
        }
        guard session.resentBytes else { return }
        var announced = resent
        for index in 0..<layout.chunkCount where everSent.contains(index) && !have.contains(index) {
            announced += Int64(layout.locate(index)?.chunk.size ?? 0)
        }
        link?.send([.resent(id: transfer.id, bytes: UInt64(announced))], on: session.id)
    }

    func resentReceived(_ id: TransferID, bytes: UInt64, from session: LinkSession) {
        guard let transfer = transfers.incoming[id], transfer.peerKey == session.deviceKey, !transfer.isFinished else { return }
        // (A hostile figure only misstates the sender's own work.)
        transfer.with { t in
            t.announcedResent = Int64(clamping: bytes)
            t.attemptDuplicates = 0
        }
    }
}

extension OutgoingTransfer.Fields {
    /// Counts `batch` (chunks put on the wire now) against the chunks sent before (inside
    /// the transfer's lock, with the window's step that chose them).
    mutating func countSent(_ batch: [Int]) {
        for index in batch where !everSent.insert(index) {
            resentBytes = (resentBytes ?? 0) + Int64(layout.locate(index)?.chunk.size ?? 0)
        }
    }
}

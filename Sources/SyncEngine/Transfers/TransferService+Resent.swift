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

    /// Counts `batch` (chunks put on the wire now) against the chunks sent before.
    func countSent(_ batch: [Int], of transfer: OutgoingTransfer) {
        for index in batch where !transfer.everSent.insert(index) {
            transfer.resentBytes = (transfer.resentBytes ?? 0) + Int64(transfer.layout.locate(index)?.chunk.size ?? 0)
        }
    }

    /// After an accept that holds `have`: tells a receiver that takes it what this attempt's
    /// "re-sent" figure will be.
    func announceResent(_ transfer: OutgoingTransfer, have: Set<Int>, on session: LinkSession) {
        var announced = transfer.resentBytes ?? 0
        transfer.resentBytes = announced
        guard session.resentBytes else { return }
        for index in 0..<transfer.layout.chunkCount where transfer.everSent.contains(index) && !have.contains(index) {
            announced += Int64(transfer.layout.locate(index)?.chunk.size ?? 0)
        }
        link?.send([.resent(id: transfer.id, bytes: UInt64(announced))], on: session.id)
    }

    func resentReceived(_ id: TransferID, bytes: UInt64, from session: LinkSession) {
        guard let transfer = transfers.incoming[id], transfer.peerKey == session.deviceKey, !transfer.isFinished else { return }
        // (A hostile figure only misstates the sender's own work.)
        transfer.announcedResent = Int64(clamping: bytes)
        transfer.attemptDuplicates = 0
    }
}

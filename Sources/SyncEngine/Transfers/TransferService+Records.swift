internal import PeerIndex
internal import PeerWire

/// Index writes of transfers. Resume after a restart depends on these records, so a failed
/// write is never silent: one path reports it as an `error` event naming the transfer and
/// what was not recorded, and marks the transfer (its events carry the failure as `reason`
/// until a later write succeeds). Runs on the node's queue.
extension TransferService {
    /// Runs `write` against the index for a running transfer; returns whether it worked.
    @discardableResult
    func recordTransfer(_ transfer: any TransferBase, _ what: String,
                        _ write: (any TransferStore) throws(IndexError) -> Void) -> Bool {
        do throws(IndexError) {
            try write(store)
            transfer.recordFailure = nil
            return true
        } catch {
            let reason = Self.recordFailure(what, name: transfer.name, id: transfer.id.description, error)
            transfer.recordFailure = reason
            emitError(transfer.peer, reason)
            return false
        }
    }

    /// Runs `write` for a transfer that is only a record (not running); a failure is reported.
    @discardableResult
    func recordTransfer(_ record: TransferRecord, _ what: String,
                        _ write: (any TransferStore) throws(IndexError) -> Void) -> Bool {
        do throws(IndexError) {
            try write(store)
            return true
        } catch {
            emitError(nil, Self.recordFailure(what, name: record.name, id: record.id, error))
            return false
        }
    }

    static func recordFailure(_ what: String, name: String, id: String, _ error: IndexError) -> String {
        "cannot record \(what) of transfer \(name) (\(id.prefix(8))) in the index: \(error.description)"
    }
}

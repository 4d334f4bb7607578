internal import Dispatch
internal import PeerIndex
internal import PeerWire
/// The transfer history `transfers` lists, and how long it is kept: finished transfers
/// (completed, failed, cancelled) are deleted from the index once older than
/// `historyDays` or beyond the newest `historyCount`, when the node starts and as each
/// transfer ends. Unfinished ones (offered, active, paused) stay until they end: resume
/// needs them. README ("Transfers") states both numbers.
extension TransferService {
    /// Finished transfers older than this many days are forgotten.
    static let historyDays = 30
    /// At most this many finished transfers are kept (the newest).
    static let historyCount = 1000

    /// Deletes the finished transfers beyond the history's bounds (on the node's queue).
    func pruneHistory() {
        dispatchPrecondition(condition: .onQueue(queue))
        let cutoff = now() - Int64(Self.historyDays) * 86_400_000
        do throws(IndexError) {
            _ = try store.pruneFinishedTransfers(changedBefore: cutoff, keepingNewest: Self.historyCount)
        } catch {
            emitError(nil, "cannot forget old finished transfers in the index: \(error.description)")
        }
    }

    /// Running transfers (newest first), then recorded ones (newest first): one page. The
    /// recorded ones are bounded by `pruneHistory` (and the unfinished by the bounds on
    /// offers); only the page's entries are turned into events.
    /// An index that cannot be read fails the list with its cause (not an empty history).
    func transferList(_ page: PageRequest) throws(EngineError) -> ListPage<TransferInfo> {
        let result: Result<ListPage<TransferInfo>, EngineError> = queue.sync {
            let table = transfers
            let live: [any TransferBase] = Array(table.outgoing.values) + Array(table.incoming.values)
            let running = Set(live.map(\.id.description))
            let recorded: [TransferRecord]
            do throws(IndexError) { recorded = try store.transfers(deviceID: nil) } catch { return .failure(.index(error)) }
            let records = recorded.filter { !running.contains($0.id) }
            let entries = live.map(HistoryEntry.running) + records.map(HistoryEntry.recorded)
            return .success(page.page(entries, key: \.pageKey) { entry in
                switch entry {
                case let .running(transfer): transferEvent(transfer, force: true)
                case let .recorded(record): Self.recordEvent(record, store: store)
                }
            })
        }
        return try result.get()
    }

    /// One line of `transfers`.
    enum HistoryEntry {
        case running(any TransferBase)
        case recorded(TransferRecord)

        /// Running ones first, each part newest first (fixed-width inverted times sort as
        /// strings), then by ID.
        var pageKey: String {
            switch self {
            case let .running(transfer): "0" + Self.newestFirst(transfer.startedAt) + transfer.id.description
            case let .recorded(record): "1" + Self.newestFirst(record.createdAt) + record.id
            }
        }

        static func newestFirst(_ milliseconds: Int64) -> String {
            let digits = String(Int64.max - max(0, milliseconds))
            return String(repeating: "0", count: max(0, 19 - digits.count)) + digits
        }
    }
}

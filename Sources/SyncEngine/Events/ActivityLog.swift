internal import PeerCrypto
internal import PeerNet
internal import Synchronization

/// What happened lately, kept by the daemon for pages that open later (the dashboard's
/// activity log; `activity` on the control socket): the last `capacity` events, newest
/// first. A transfer's progress is not kept, only its changes of state, so one long
/// transfer cannot push everything else out. Bounded: at most `capacity` + `slack` events,
/// a message's text cut to `messageBytes` (a peer's 64 KiB messages would otherwise hold
/// 64 MiB), and the last state of at most `trackedTransfers` transfers.
final class ActivityLog: Sendable {
    static let capacity = 1000
    /// Events beyond `capacity` before the oldest are dropped (one copy per `slack` events).
    static let slack = 100
    static let messageBytes = 1024
    static let trackedTransfers = 4096

    private struct State {
        /// Oldest first; trimmed to `capacity` once it holds `slack` more.
        var entries: [(seq: UInt64, event: NodeEvent)] = []
        var seq: UInt64 = 0
        /// Each running transfer's last state kept (by ID, or "who and what" while it prepares).
        var transferStates: [String: TransferState] = [:]
    }

    private let state = Mutex(State())

    /// Keeps `event`, unless it is a transfer's progress (the same state as its last one kept)
    /// or folder sync's running commentary: a folder's scanning, syncing and idle (without a
    /// reason), and a file starting or ending its pull (`syncpeer events` streams those; a
    /// pull of 10,000 files would otherwise push everything else out). A file that failed or
    /// conflicted is kept.
    func record(_ event: NodeEvent) {
        switch event {
        case let .folder(change) where change.reason == nil && [.scanning, .syncing, .idle].contains(change.state):
            return
        case let .file(change) where change.state == .syncing || change.state == .pulled:
            return
        default:
            break
        }
        state.withLock { state in
            if case let .transfer(info) = event {
                let key = info.transfer ?? "\(info.direction.rawValue)\u{0}\(info.peer?.id.description ?? "")\u{0}\(info.name)"
                guard state.transferStates[key] != info.state else { return }
                if state.transferStates.count >= Self.trackedTransfers { state.transferStates.removeAll() }
                state.transferStates[key] = info.state
            }
            state.seq += 1
            state.entries.append((state.seq, Self.kept(event)))
            if state.entries.count > Self.capacity + Self.slack { state.entries.removeFirst(state.entries.count - Self.capacity) }
        }
    }

    /// The events kept, newest first, as pages (`PageRequest`: the key of each is its place
    /// from the newest, so a page asked for later starts right after the last one shown).
    func page(_ request: PageRequest) -> ListPage<JSONValue> {
        let kept = state.withLock { Array($0.entries.suffix(Self.capacity)) }
        return request.page(kept, key: { Self.key($0.seq) }) { $0.event.json }
    }

    /// The event as kept: a message's text cut to `messageBytes` (on a character boundary).
    static func kept(_ event: NodeEvent) -> NodeEvent {
        guard case var .message(message) = event, message.text.utf8.count > messageBytes else { return event }
        var cut = message.text.utf8.prefix(messageBytes).count
        while cut > 0, String(message.text.utf8.prefix(cut)) == nil { cut -= 1 }
        message.text = String(message.text.utf8.prefix(cut))! + "…"
        return .message(message)
    }

    /// Sorts newest first: the sequence number counted down from the largest, zero-padded.
    static func key(_ seq: UInt64) -> String {
        let text = String(UInt64.max - seq)
        return String(repeating: "0", count: 20 - text.count) + text
    }
}

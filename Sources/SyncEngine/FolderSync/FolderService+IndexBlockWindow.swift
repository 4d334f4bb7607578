internal import Dispatch
internal import PeerWire
internal import Synchronization

/// Small files' content sent with index pages (`Frame.indexBlocks`) that the peer has not
/// taken into a pull yet, per session and folder, and the page that waits for room.
///
/// A receiver holds such content within its node's `IndexBlockBudget` and drops what
/// arrives beyond it; the files of a dropped page are then asked for by block requests, so
/// their bytes cross the wire twice. A receiver acknowledges a page that came with content
/// only once a pull has taken it (`indexAck`, docs/PROTOCOL.md); the sender keeps at most
/// `limit` of content unacknowledged and the next page with content waits for the
/// acknowledgements. The receiver thus holds at most what its pulls hold plus `limit`
/// waiting: both within its budget when `limit` is half of it. (B, 100,000 files of 4 KiB
/// before: 696 MB sent for 410 MB, ~70 % of the files' content dropped and asked for again.)
/// A peer that acknowledges at once (an older one) keeps the window empty.
struct IndexBlockWindow {
    /// A page read with its content, waiting for room (the pass stops meanwhile).
    struct Waiting {
        let frames: [Frame]
        let sequence: Int64
        let cost: Int
        let session: LinkSession
        let full: Bool
        let carrier: SharedFolder
    }

    /// Session ID → folder → (highest sequence of a page, what its content costs), in order.
    private var unacked: [UInt64: [String: [(sequence: Int64, cost: Int)]]] = [:]
    private var waiting: [UInt64: [String: Waiting]] = [:]

    /// What is sent to the session for the folder and not acknowledged.
    func bytes(session: UInt64, folder: String) -> Int {
        unacked[session]?[folder]?.reduce(0) { $0 + $1.cost } ?? 0
    }

    /// Whether `cost` more may go now: always when nothing is unacknowledged (one page is
    /// never stuck), else within `limit`.
    func fits(_ cost: Int, session: UInt64, folder: String, limit: Int) -> Bool {
        let held = bytes(session: session, folder: folder)
        return held == 0 || held + cost <= limit
    }

    mutating func sent(sequence: Int64, cost: Int, session: UInt64, folder: String) {
        guard cost > 0 else { return }
        unacked[session, default: [:]][folder, default: []].append((sequence, cost))
    }

    mutating func wait(_ page: Waiting, folder: String) {
        waiting[page.session.id, default: [:]][folder] = page
    }

    /// The peer acknowledged `sequence`: the pages up to it are taken. Returns the waiting
    /// page once it fits (it is no longer waiting).
    mutating func acked(_ sequence: Int64, session: UInt64, folder: String, limit: Int) -> Waiting? {
        if var pages = unacked[session]?[folder] {
            pages.removeAll { $0.sequence <= sequence }
            unacked[session]?[folder] = pages.isEmpty ? nil : pages
        }
        guard let page = waiting[session]?[folder], fits(page.cost, session: session, folder: folder, limit: limit) else { return nil }
        waiting[session]?[folder] = nil
        return page
    }

    /// The page waiting since `sequence` goes now whatever is unacknowledged (those pages
    /// are taken as lost: a receiver that refused them, or could not store them, never
    /// acknowledges them). Nil if it went already.
    mutating func expire(_ sequence: Int64, session: UInt64, folder: String) -> Waiting? {
        guard let page = waiting[session]?[folder], page.sequence == sequence else { return nil }
        waiting[session]?[folder] = nil
        unacked[session]?[folder] = nil
        return page
    }

    /// Forgets the session; returns the folders whose pass waited for room.
    mutating func forget(session: UInt64) -> [String] {
        unacked[session] = nil
        return waiting.removeValue(forKey: session).map { Array($0.keys) } ?? []
    }
}

extension FolderService {
    /// The most content of index pages sent to one peer for one folder and not taken by its
    /// pulls yet: half the node's budget (the peer's, if it runs the same settings).
    var indexBlockWindow: Int { indexBlockBudget.limit / 2 }

    /// Sends a page and the content that goes with it (`frames`, `cost` as the receiver
    /// counts it), then goes on with the pass; or holds it until the peer has taken enough
    /// of what it was sent (`IndexBlockWindow`). On `queue`.
    func sendIndexPage(_ frames: [Frame], sequence: Int64, cost: Int, folderID: String, to session: LinkSession, full: Bool,
                       carrier: SharedFolder) {
        dispatchPrecondition(condition: .onQueue(queue))
        let page = IndexBlockWindow.Waiting(frames: frames, sequence: sequence, cost: cost, session: session, full: full, carrier: carrier)
        let now = state.withLock { state in
            guard state.blockWindow.fits(cost, session: session.id, folder: folderID, limit: indexBlockWindow) else {
                state.blockWindow.wait(page, folder: folderID)
                return false
            }
            state.blockWindow.sent(sequence: sequence, cost: cost, session: session.id, folder: folderID)
            return true
        }
        guard now else {
            // A page waits at most `blockTimeout` for acknowledgements: the pass goes on then.
            queue.asyncAfter(deadline: .now() + .seconds(Int(Self.blockTimeout.components.seconds))) { [weak self] in
                guard let self else { return }
                let page = state.withLock { state -> IndexBlockWindow.Waiting? in
                    guard let page = state.blockWindow.expire(sequence, session: session.id, folder: folderID) else { return nil }
                    state.blockWindow.sent(sequence: page.sequence, cost: page.cost, session: session.id, folder: folderID)
                    return page
                }
                if let page { resume(page, folderID: folderID) }
            }
            return
        }
        sendWindowed(page, folderID: folderID)
    }

    /// The peer acknowledged `sequence` of the folder's pages: a page waiting for room goes
    /// if it fits now. On `queue`.
    func indexBlocksAcked(_ folderID: String, sequence: Int64, from session: LinkSession) {
        let limit = indexBlockWindow
        let page = state.withLock { state -> IndexBlockWindow.Waiting? in
            guard let page = state.blockWindow.acked(sequence, session: session.id, folder: folderID, limit: limit) else { return nil }
            state.blockWindow.sent(sequence: page.sequence, cost: page.cost, session: session.id, folder: folderID)
            return page
        }
        if let page { resume(page, folderID: folderID) }
    }

    /// Sends a page that waited, if the folder is still shared with the peer (it may have been
    /// unshared, or the peer left it, meanwhile); else its pass ends.
    private func resume(_ page: IndexBlockWindow.Waiting, folderID: String) {
        guard state.withLock({ $0.folders[folderID] }) === page.carrier, isMember(page.session.deviceKey, of: folderID) else {
            return endIndexPass("\(folderID)|\(page.session.id)")
        }
        sendWindowed(page, folderID: folderID)
    }

    /// A session ended: the passes that waited for room end.
    func forgetIndexBlockWindow(_ session: LinkSession) {
        for folderID in state.withLock({ $0.blockWindow.forget(session: session.id) }) { endIndexPass("\(folderID)|\(session.id)") }
    }

    private func sendWindowed(_ page: IndexBlockWindow.Waiting, folderID: String) {
        link?.send(page.frames, on: page.session.id)
        sendIndexPageLater(folderID, to: page.session, full: page.full)
    }
}

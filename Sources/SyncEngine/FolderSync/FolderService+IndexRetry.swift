internal import Dispatch
internal import PeerIndex
internal import PeerModel
internal import Synchronization

/// An index pass (our index pages for a member, `sendIndex`) whose read of the index fails:
/// the pass is held, not ended, and goes on by itself `IndexRetry.delay` later. While it is
/// held, another `sendIndex` for that folder and session changes nothing (the pass is still
/// running), so a broken index has one retry per folder and session however often the folder
/// changes; the error is said once while it stays the same, and forgotten once a page reads.
///
///     page ─read─(IndexError)─▶ held: error event (when new) ─delay─▶ page (session gone: pass ends)
///       └─(read)─▶ the failure is forgotten: the next one is said again
extension FolderService {
    /// How long after an index read failed a pass goes on (seconds).
    static let indexRetrySeconds = 10

    /// The pass's page read `error` (on `queue`): says so unless it said that already, and
    /// tries the page again later, once.
    func indexPassFailed(_ folderID: String, to session: LinkSession, full: Bool, _ error: IndexError) {
        dispatchPrecondition(condition: .onQueue(queue))
        let pass = "\(folderID)|\(session.id)"
        let delay = state.withLock { $0.indexRetry.delay }
        let message = "folder \(folderID): cannot read the index to send to \(session.peer.name), trying again in \(delay): \(error)"
        if state.withLock({ $0.indexRetry.failed(pass, message) }) { emitError(session.peer, message) }
        queue.asyncAfter(deadline: .now() + .milliseconds(Int(delay / .milliseconds(1)))) { [weak self] in
            guard let self else { return }
            // (Only for a session still connected: a new one starts its own pass.)
            guard state.withLock({ $0.link })?.session(session.id)?.isConnected == true else { return endIndexPass(pass) }
            sendIndexPage(folderID, to: session, full: full)
        }
    }
}

/// The index passes held after a failed read ("folder|session ID"), in `FolderService.State`.
struct IndexRetry {
    /// How long a held pass waits (tests shorten it).
    var delay: Duration = .seconds(FolderService.indexRetrySeconds)
    /// The error each held pass said, and how many reads failed in a row.
    private(set) var held: [String: (message: String, failures: Int)] = [:]

    /// `pass` failed with `message`: whether that is news to say (another error, or the first).
    mutating func failed(_ pass: String, _ message: String) -> Bool {
        let said = held[pass]?.message
        held[pass] = (message, (held[pass]?.failures ?? 0) + 1)
        return said != message
    }

    /// `pass` read the index (or ended): its failure is forgotten.
    mutating func read(_ pass: String) {
        held[pass] = nil
    }

    /// Reads that failed in a row for `pass` (0: it is not held).
    func failures(_ pass: String) -> Int { held[pass]?.failures ?? 0 }
}

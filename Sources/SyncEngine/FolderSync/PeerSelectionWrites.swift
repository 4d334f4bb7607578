internal import Dispatch
internal import PeerIndex
internal import PeerModel
internal import Synchronization

/// Members' announced selections (`Frame.folderSelection`) on their way to the index,
/// coalesced per folder and member: a member that sends a new one in every frame made us
/// commit one SQLite transaction per frame (thousands a second). The first change after a
/// quiet `interval` is written at once (a restart soon after still finds it); later ones wait
/// until `interval` after the last write, and only the latest of each is written then.
final class PeerSelectionWrites: Sendable {
    static let interval: Duration = .seconds(1)

    struct Waiting: Sendable {
        let folderID: String
        let device: String
        let peer: PeerRef
        let paths: [String]
    }

    private struct State {
        var waiting: [String: Waiting] = [:]
        var lastWrite: ContinuousClock.Instant?
        var flushing = false
        var written = 0
    }

    private let state = Mutex(State())

    /// Keeps `selection` (the latest of its folder and member); returns when to write what
    /// waits: `.zero` now, later, or nil when a write is already on its way.
    func note(_ selection: Waiting, now: ContinuousClock.Instant = .now) -> Duration? {
        state.withLock { state in
            state.waiting[selection.folderID + "|" + selection.device] = selection
            guard !state.flushing else { return nil }
            state.flushing = true
            return state.lastWrite.map { max(.zero, Self.interval - (now - $0)) } ?? .zero
        }
    }

    /// What waits, to be written now (the write is counted).
    func take(now: ContinuousClock.Instant = .now) -> [Waiting] {
        state.withLock { state in
            defer { state.waiting = [:] }
            state.flushing = false
            state.lastWrite = now
            state.written += state.waiting.count
            return Array(state.waiting.values)
        }
    }

    /// Selections written so far (for tests and bounds).
    var written: Int { state.withLock { $0.written } }
}

extension FolderService {
    /// Writes a member's announced selection of `folderID` to the index, coalesced
    /// (`PeerSelectionWrites`; on `queue`).
    func savePeerSelection(_ folderID: String, paths: [String], of peer: PeerRef, device: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        let waiting = PeerSelectionWrites.Waiting(folderID: folderID, device: device, peer: peer, paths: paths)
        guard let delay = peerSelectionWrites.note(waiting) else { return }
        if delay == .zero { return writePeerSelections() }
        let (seconds, attoseconds) = delay.components
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))) { [weak self] in
            self?.writePeerSelections()
        }
    }

    /// Writes what waits (on `queue`): only for a folder we still have and a member still in it.
    private func writePeerSelections() {
        for selection in peerSelectionWrites.take() {
            guard state.withLock({ $0.folders[selection.folderID] != nil }), isMember(selection.device, of: selection.folderID) else { continue }
            do { try index.setPeerSelection(folderID: selection.folderID, deviceID: selection.device, paths: selection.paths) } catch {
                emitError(selection.peer, "folder \(selection.folderID): cannot record the subtrees the peer holds: \(error.description)")
            }
        }
    }
}

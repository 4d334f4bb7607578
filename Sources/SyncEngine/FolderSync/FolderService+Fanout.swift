#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// Fan-out between the members fetching the same file (`HeldChunks`): what we hold of the
/// files we fetch goes to the members that take it, and what they hold comes in.
extension FolderService {
    /// The hello feature of a node that takes `chunkHave` frames (and serves what it announces).
    static let chunkHaveFeature = "chunk-have"

    /// Sends `note` to every connected member of `folder` whose hello lists `chunk-have`.
    /// Any thread (the fetched blocks' callbacks): the send goes out on `queue`.
    /// A file the folder's rules no longer let us serve (changed during its pull) is
    /// withdrawn instead of announced (`SharedFolder.heldBytes`).
    ///
    /// The roles, as for our index pages (`FolderRoles.sends`): what we fetch is another
    /// member's change, which goes to every member; our own change coming back (`ownChange`:
    /// we lost it here and a member still has it) is not announced to a member we are
    /// receive-only towards, nor withdrawn from it. Its chunks are served by the same rule as
    /// a placed file's: to a member that asks by their hashes.
    func announceHeld(_ folder: SharedFolder, _ note: HeldChunks.Note) {
        // (Its withdrawal comes back here, as one.)
        if !note.isWithdrawal, !folder.servesHeld(note.path) { return folder.withdrawHeld(note.path) }
        let frame = Frame.chunkHave(folder: folder.id, path: note.path, root: note.root, count: note.count, bitmap: note.bitmap)
        guard (try? frame.validate()) != nil else { return }
        queue.async { [self] in
            let told = note.ownChange ? heldOwnChangeRecipients(folder.id) : nil
            for session in connectedMembers(of: folder.id) where session.chunkHave && told?(session.deviceKey) != false {
                link?.send([frame], on: session.id)
            }
        }
    }

    /// Which members are told of our own change being fetched (on `queue`): those our index
    /// pages give it to. Roles that cannot be read tell nobody (an announcement is a hint).
    private func heldOwnChangeRecipients(_ folderID: String) -> (String) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let roles = try? index.folderPeerRoles(folderID: folderID) else { return { _ in false } }
        let localDevice = localDevice
        return { device in
            FolderRoles.sends(modifiedBy: localDevice, localDevice: localDevice, to: roles[device].map(PeerPolicy.init) ?? PeerPolicy())
        }
    }

    /// The folder is unshared (on `queue`): nothing more is served of the files it fetches;
    /// the withdrawals of those announced, for each member (by device) to get before the
    /// share's end (of our own changes, only for the members they were announced to).
    func withdrawAllHeld(_ folderID: String) -> (String) -> [Frame] {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let folder = state.withLock({ $0.folders[folderID] }) else { return { _ in [] } }
        let notes = folder.held.drop { _ in true }
        let told = notes.contains(where: \.ownChange) ? heldOwnChangeRecipients(folderID) : { _ in true }
        let frames = notes.map { note in
            (note.ownChange, Frame.chunkHave(folder: folderID, path: note.path, root: note.root, count: note.count, bitmap: note.bitmap))
        }.filter { (try? $0.1.validate()) != nil }
        return { device in frames.filter { !$0.0 || told(device) }.map(\.1) }
    }

    /// A member's `chunkHave` (on `queue`): kept for the folder's pulls, only from a member
    /// of a folder we have.
    func heldChunksReceived(_ folderID: String, path: String, root: [UInt8], count: UInt32, bitmap: [UInt8],
                            from session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let folder = state.withLock({ $0.folders[folderID] }), isMember(session.deviceKey, of: folderID) else { return }
        folder.held.received(device: session.deviceKey, path: path, root: root, count: count, bitmap: bitmap)
    }

    /// Holds the serve queue's thread until `bytes` more fit the test knob's rate
    /// (`SYNCPEER_SERVE_RATE`, per folder); returns at once without it.
    func paceServing(_ folder: SharedFolder, bytes: Int) {
        let rate = config.serveRateBytesPerSecond
        guard rate > 0 else { return }
        let wait = folder.pacer.due(bytes: bytes, rate: rate) - .now
        if wait > .zero {
            let (seconds, attoseconds) = wait.components
            var time = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            var left = timespec()
            while nanosleep(&time, &left) != 0 && errno == EINTR { time = left }
        }
    }
}

extension FolderHost {
    /// Hosts without sessions announce nothing.
    func announceHeld(_ folder: SharedFolder, _ note: HeldChunks.Note) {}
}

/// The schedule of a folder's served bytes under `SYNCPEER_SERVE_RATE`: each answer gets
/// the time its bytes are due at that rate, after those reserved before it.
final class ServePacer: Sendable {
    private let next = Mutex<ContinuousClock.Instant?>(nil)

    /// When `bytes` more may go at `rate` bytes per second (now, or later).
    func due(bytes: Int, rate: Int, now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant {
        next.withLock { next in
            let start = max(next ?? now, now)
            next = start + .seconds(Double(bytes) / Double(rate))
            return start
        }
    }
}

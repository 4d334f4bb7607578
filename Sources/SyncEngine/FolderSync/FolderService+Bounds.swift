internal import Foundation
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// What keeps a folder peer inside its bounds on this node: a shared folder's label is a
/// name made into a new directory inside the receive folder, its share offers waiting for
/// an answer are bounded, and block requests for what is not shared are refused and, when
/// they pile up, reported.
extension FolderService {
    /// Creates `<receive folder>/<name>` for an accepted offer: a new directory (never an
    /// existing one: `name (1)`… if taken), made through the open receive folder with the
    /// *at() calls, so a name from a peer can never create or reuse anything outside it.
    func makeReceivedFolder(named name: String) throws(EngineError) -> String {
        let receive = URL(fileURLWithPath: config.receiveDirectory).standardizedFileURL.path
        do {
            // The receive folder is the user's setting: made with its parents if missing.
            try DurableNames.createDirectories(receive)
        } catch {
            throw .io(path: receive, reason: "cannot create the receive folder")
        }
        do {
            let made = try DirectoryHandle(path: receive).makeNewSubdirectory(for: name)
            return made.handle.path
        } catch {
            throw .io(path: receive + "/" + name, reason: "cannot create it: \(error)")
        }
    }

    /// Most share offers from one peer waiting for an answer (they are kept in the index,
    /// across restarts, until answered, withdrawn by the peer, or the peer is forgotten).
    /// Past it a new one is refused at once (a `shareAnswer` that says why) and not stored:
    /// one peer made 3,500 in half a second, and `status` lists every offer.
    static let maxShareOffers = 32

    /// Why a new share offer from `session`'s peer is refused, or nil when it may be stored.
    func shareOfferRefusal(from session: LinkSession) -> String? {
        // A count the index cannot give refuses: the bound holds whatever the disk does.
        let count = (try? index.folderOfferCount(deviceID: session.deviceKey)) ?? Self.maxShareOffers
        guard count >= Self.maxShareOffers else { return nil }
        return "refused: \(Self.maxShareOffers) folders you shared are already waiting for an answer here; "
            + "share it again once they are answered"
    }

    /// Reports share offers refused for the bound: the 1st, 10th, 100th, ... of a session.
    func shareOfferRefused(_ reason: String, from session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        let count = state.withLock { state in
            state.refusedShareOffers[session.id, default: 0] += 1
            return state.refusedShareOffers[session.id, default: 0]
        }
        guard Self.isReported(count) else { return }
        emitError(session.peer, "refused a share offer from \(session.peer.name) (\(count) refused in this session): \(reason)")
    }

    /// Refusals of block requests for what is not shared, per session, before the user is
    /// told (once per session): an honest peer gets a few when it asks for a file that just
    /// changed; a peer probing for unshared data gets many.
    static let refusalsReported = 16

    /// Counts a refused block request (no such folder for the peer, or not shared in it).
    /// On the node's queue.
    func blockRefused(to session: LinkSession, folder: SharedFolder?) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard link?.session(session.id) != nil else { return }
        let count = state.withLock { state in
            state.refusedBlocks[session.id, default: 0] += 1
            return state.refusedBlocks[session.id, default: 0]
        }
        guard count == Self.refusalsReported else { return }
        emit(.refused(.init(peer: session.peer, reason: """
            refused \(count) block requests for data not shared with this peer (ignored, deleted or unknown \
            files, or ranges that are not chunks of a shared file): it may be probing for files it must not see
            """, folder: folder?.id, name: folder?.label, time: now())))
    }
}

extension FolderRecord {
    /// The label as shown and sent: a safe name even for records stored by older versions.
    var safeLabel: String { FolderLabel.safeName(label, fallback: id) }
}

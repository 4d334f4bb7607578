internal import Dispatch
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import Synchronization
internal import PeerWire

/// Selective sync as the other members see it (`Frame.folderSelection`, hello feature
/// `selection`): a node tells each member which subtrees of a folder it holds, so that the
/// member's `status` counts that node's completion over what it holds, not over files it
/// chose to leave out (which it never fetches: without this, 99 % for ever).
///
/// An announcement is only a display hint. Nothing else reads it: blocks are served, index
/// pages sent and a member's entries applied exactly as without it, so a hostile member's
/// announcement can hide nothing from it nor make us delete or skip anything. It is checked
/// as a local selection is (at most 1,000 safe paths; the frame's limits bound it on the
/// wire), taken only from a member of a folder we have, one per folder and member (the
/// newest replaces it), and kept in the index (`folder_peer_selection`), so that `status`
/// still counts a member over what it holds after a restart of this node, before the member
/// connects and says it again. A member never heard from counts as holding the whole folder,
/// as a peer without the feature does.
extension FolderService {
    /// The hello feature of a node that takes a folder's selection (`Frame.folderSelection`).
    static let selectionFeature = "selection"

    /// Tells `session`'s peer which subtrees of `folderID` this node holds, if it takes it
    /// (on `queue`). An empty list says the whole folder (a selection widened again).
    func announceSelection(_ folderID: String, to session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard session.selection else { return }
        let paths: [String]
        do throws(IndexError) { paths = try index.selection(folderID: folderID) } catch {
            // Said; it is announced again when the peer next connects.
            return emitError(session.peer, "folder \(folderID): cannot read its selection to announce it: \(error.description)")
        }
        guard paths.count <= WireLimits.maxSelectionPaths else { return }
        link?.send([.folderSelection(folder: folderID, paths: paths)], on: session.id)
    }

    /// Tells every connected member of `folderID` (on `queue`): the selection changed.
    func announceSelection(_ folderID: String) {
        for session in connectedMembers(of: folderID) { announceSelection(folderID, to: session) }
    }

    /// A member's announcement (on `queue`). From a non-member, or for a folder we do not
    /// have, it is dropped; an invalid one (an unsafe path) forgets what the member said
    /// before: it counts as holding everything.
    func selectionReceived(_ folderID: String, paths: [String], from session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard state.withLock({ $0.folders[folderID] != nil }), isMember(session.deviceKey, of: folderID) else { return }
        let key = Self.peerSelectionKey(folderID, session.deviceKey)
        let selection = try? FolderSelection(paths)
        let kept = selection?.isEverything == false ? selection : nil
        let changed = state.withLock { state in
            defer { state.peerSelections[key] = kept }
            return state.peerSelections[key] != kept
        }
        // Kept in the index too (only when it changed: every connect repeats it), so a
        // restart of this node still shows what the member holds while it is away; at most
        // one write per member and `PeerSelectionWrites.interval` (the latest wins).
        if changed { savePeerSelection(folderID, paths: kept?.paths ?? [], of: session.peer, device: session.deviceKey) }
        guard selection != nil else {
            emitError(session.peer, "folder \(folderID): ignored the subtrees the peer says it holds: a path is not safe")
            return
        }
    }

    /// Takes what the members of `folderID` said they hold from the index (on `queue`, as
    /// the folder starts): until a member connects and says it again, `status` counts it as
    /// it did before the restart. A stored list that no longer checks counts as everything.
    func loadPeerSelections(_ folderID: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        let stored: [String: [String]]
        do { stored = try index.peerSelections(folderID: folderID) } catch {
            emitError(nil, "folder \(folderID): cannot read the subtrees the members hold: \(error.description)")
            return
        }
        state.withLock { state in
            for (device, paths) in stored {
                guard let selection = try? FolderSelection(paths), !selection.isEverything else { continue }
                state.peerSelections[Self.peerSelectionKey(folderID, device)] = selection
            }
        }
    }

    /// What `device` said it holds of `folderID` (nil: everything; any thread).
    func peerSelection(_ folderID: String, device: String) -> FolderSelection? {
        queue.sync { state.withLock { $0.peerSelections[Self.peerSelectionKey(folderID, device)] } }
    }

    /// Forgets what members said of `folderID` (all of them, or `device`), on `queue`:
    /// the folder was removed, or the member left it.
    func forgetPeerSelections(_ folderID: String, device: String? = nil) {
        dispatchPrecondition(condition: .onQueue(queue))
        state.withLock { state in
            if let device {
                state.peerSelections[Self.peerSelectionKey(folderID, device)] = nil
            } else {
                state.peerSelections = state.peerSelections.filter { !$0.key.hasPrefix(folderID + "|") }
            }
        }
    }

    /// Which paths count for `status`'s comparison of `folder` with `device`'s index: those
    /// both this node and that member hold (nil: every path).
    func comparedPaths(_ folder: SharedFolder, with device: String) -> ((String, Bool) -> Bool)? {
        let ours = folder.holds
        guard let theirs = peerSelection(folder.id, device: device) else { return ours }
        guard let ours else { return { theirs.contains($0, isDirectory: $1) } }
        return { ours($0, $1) && theirs.contains($0, isDirectory: $1) }
    }

    private static func peerSelectionKey(_ folderID: String, _ device: String) -> String { "\(folderID)|\(device)" }
}

extension FolderService {
    /// The most of a member's selected paths `status` lists.
    static let shownPeerSelection = 20

    /// Sets each member's `holds` from what it announced (any thread but `queue`).
    func showAnnouncedSelections(_ peers: inout [FolderPeer], folderID: String) {
        for n in peers.indices {
            peers[n].holds = Array((peerSelection(folderID, device: peers[n].peer.id.compact)?.paths ?? []).prefix(Self.shownPeerSelection))
        }
    }
}

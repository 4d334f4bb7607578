#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// Shared folders on the node: sharing and accepting, index exchange, serving blocks.
///
///     A: share DIR --with B ──shareOffer(folder, label)──▶ B: offer event (or auto-accept)
///                         ◀─shareAnswer(accepted)──────── B: accept FOLDER --into DIR
///     both: indexUpdate(entries since the peer's last ack) ──▶ store remote index, indexAck
///           ──▶ SyncPlanner ──▶ blockRequest / blockResponse for missing chunks

/// The folder service owns the folder table, the index exchange with members and block
/// serving; each folder (`SharedFolder`) reaches it through `FolderHost`, and it reaches
/// sessions through `PeerLink` only.
final class FolderService: Reporting, Sendable {
    // Checked: the folder table and what is in flight live in `state` (a `Mutex`), changed
    // on `queue` (the owner's, the node's: `dispatchPrecondition` guards its entry points);
    // disk work runs on each folder's own queues.
    static let indexBatch = 1_000
    static let blockTimeout: Duration = .seconds(30)
    /// The hello feature of a node that answers block delta requests (`BlockDelta`).
    static let blockDeltaFeature = "block-delta"
    /// The hello feature of a node that takes small files' content with the index
    /// (`Frame.indexBlocks`).
    static let indexBlocksFeature = "index-blocks"
    /// What each member may make us hash for delta answers.
    let deltaAllowance = DeltaAllowance()
    /// What small files' content that came with index pages may hold while it waits.
    let indexBlockBudget: IndexBlockBudget
    /// Members' announced selections waiting to be written to the index (coalesced).
    let peerSelectionWrites = PeerSelectionWrites()

    let queue: DispatchQueue
    let index: NodeIndex
    let events: any EventSink
    /// This device's compact ID.
    let localDevice: String
    /// Shared folders, what is in flight for them, and the wiring (`State`).
    let state: Mutex<State>
    /// Device keys of the connected sessions, as of the last session hook (written on
    /// `queue`, read from the folders' queues without a hop to it: `queue` is busy storing
    /// index pages while a pull asks, B: waits of 8–58 ms a run).
    private let connected = Mutex<Set<String>>([])

    /// Its receive folder changes with `receive-dir` (on the queue).
    var config: NodeConfig {
        get { state.withLock { $0.config } }
        set { state.withLock { $0.config = newValue } }
    }
    /// Sessions (the node); weak: the node owns this service.
    var link: (any PeerLink)? {
        get { state.withLock { $0.link } }
        set { state.withLock { $0.link = newValue } }
    }
    /// Where the folders keep the versions they replace (set by the node before it starts).
    var versions: VersionKeeper? {
        get { state.withLock { $0.versions } }
        set { state.withLock { $0.versions = newValue } }
    }

    init(queue: DispatchQueue, index: NodeIndex, events: any EventSink, config: NodeConfig, localDevice: String) {
        self.queue = queue
        self.index = index
        self.events = events
        self.state = Mutex(State(config: config))
        self.indexBlockBudget = IndexBlockBudget(limit: config.indexBlockHeldBytes)
        self.localDevice = localDevice
    }

    /// The shared folders now. Any thread but `queue`: it waits for what `queue` is doing
    /// first, as the control requests always did.
    func sharedFolders() -> [SharedFolder] {
        queue.sync { state.withLock { Array($0.folders.values) } }
    }

    func emit(_ event: NodeEvent) {
        events.emit(event)
    }

    /// Connected sessions whose peers are members of `folderID` (on `queue`: the link's
    /// sessions are the connections', changed there).
    func connectedMembers(of folderID: String) -> [LinkSession] {
        dispatchPrecondition(condition: .onQueue(queue))
        // (An index that cannot say: no member is reached now; nothing is acted on for them.)
        let members = Set(((try? index.folderPeers(folderID: folderID)) ?? []).map(\.deviceID))
        return (link?.connectedSessions() ?? []).filter { members.contains($0.deviceKey) }
    }

    // MARK: - Requests (any thread)

    /// Shares a folder with paired peers (resolved by the caller; adding peers to an already
    /// shared folder).
    func share(directory: String, with devices: [(key: String, name: String)], role: PeerRole? = nil,
               noDeletes: Bool? = nil, only: [String]? = nil) throws(EngineError) -> ShareResult {
        try Self.checkShareable(directory)
        let selection = try only.map(Self.validSelection)
        let result: Result<ShareResult, EngineError> = queue.sync {
            do throws(EngineError) {
                let folder: FolderRecord
                let keys = devices.map(\.key)
                do {
                    if let existing = try index.folder(path: directory) {
                        guard selection == nil else { throw EngineError.invalidArgument("\(directory) is shared already: change what it holds with 'syncpeer select'") }
                        folder = existing
                        try index.addFolderPeers(folderID: folder.id, deviceIDs: keys)
                    } else {
                        // Peers show the label and may name a folder after it: a safe name.
                        // The folder and its peers in one transaction (see answerShareOnQueue).
                        let id = Self.newFolderID()
                        folder = try index.addFolder(id: id, path: directory,
                                                     label: FolderLabel.safeName(URL(fileURLWithPath: directory).lastPathComponent,
                                                                                 fallback: id),
                                                     sharedWith: keys)
                        try adoptRoot(of: folder)
                        if let selection { try index.setSelection(folderID: id, paths: selection.paths) }
                    }
                } catch { throw .wrapping(error) }
                try storeRole(folderID: folder.id, devices: keys, role: role, noDeletes: noDeletes)
                startFolder(folder)
                let link = link
                for session in link?.connectedSessions() ?? [] where devices.contains(where: { $0.key == session.deviceKey }) {
                    link?.send([.shareOffer(folder: folder.id, label: folder.safeLabel)], on: session.id)
                }
                var peers: [PeerRef] = []
                for device in devices { peers.append(try PeerRef.indexed(device: device.key, name: device.name, index: index)) }
                return .success(ShareResult(folder: folder.id, label: folder.safeLabel, path: folder.path, peers: peers))
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Refuses a path that does not exist or is not a folder, saying which and what to do.
    static func checkShareable(_ directory: String) throws(EngineError) {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else {
            throw .notFound("\(directory) does not exist: create it first, or check the path")
        }
        guard isDirectory else {
            throw .invalidArgument("\(directory) is a file, not a folder: share the folder that holds it, or 'syncpeer send' the file")
        }
    }

    /// Stops sharing a folder: nothing on disk changes; peers are told.
    func unshare(directory: String) throws(EngineError) -> FolderResult {
        var stopping: SharedFolder?
        let result: Result<FolderResult, EngineError> = queue.sync {
            let found: FolderRecord?
            do throws(IndexError) { found = try index.folder(path: directory) } catch { return .failure(.index(error)) }
            guard let record = found else {
                return .failure(.notFound("\(directory) is not shared; see 'syncpeer status'"))
            }
            let link = link
            let withdrawn = withdrawAllHeld(record.id)
            for session in connectedMembers(of: record.id) {
                link?.send((session.chunkHave ? withdrawn(session.deviceKey) : []) + [.shareAnswer(folder: record.id, accepted: false, reason: "unshared")],
                           on: session.id)
            }
            stopping = state.withLock { $0.folders.removeValue(forKey: record.id) }
            forgetPeerSelections(record.id)
            do { _ = try index.removeFolder(id: record.id) } catch {
                // Still recorded: it would start again with the next daemon. Say so.
                return .failure(.wrapping(error))
            }
            return .success(FolderResult(folder: record.id, path: record.path))
        }
        // Off the node's queue: a pull on the folder's io may be waiting for block answers
        // that the node's queue delivers.
        stopping?.stop()
        return try result.get()
    }

    /// Accepts (into `directory`, default `<receive folder>/<label>`) or declines a share offer.
    func answerShare(_ folderID: String, accept: Bool, into directory: String?, only: [String]? = nil) throws(EngineError) -> FolderResult {
        let selection = try only.map(Self.validSelection)
        let result: Result<FolderResult, EngineError> = queue.sync {
            do throws(EngineError) { return .success(try answerShareOnQueue(folderID, accept: accept, into: directory, selection: selection)) }
            catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Per folder: state, counts, and per peer what is out of sync. Counted by SQLite: no
    /// record is loaded, so polling it (`status --watch`) holds no more memory for a large
    /// folder than for a small one.
    /// An index that cannot be read fails the whole answer with its cause (never zero counts).
    func folderStatus(_ page: PageRequest) throws(EngineError) -> ListPage<FolderStatus> {
        let list = sharedFolders()
        var failure: IndexError?
        let answer = page.page(list, key: { $0.label + "\u{0}" + $0.id }) { folder -> FolderStatus? in
            guard failure == nil else { return nil }
            do throws(IndexError) { return try status(of: folder) } catch {
                failure = error
                return nil
            }
        }
        if let failure { throw .index(failure) }
        return answer
    }

    /// One folder's `FolderStatus`.
    private func status(of folder: SharedFolder) throws(IndexError) -> FolderStatus {
        // Under one lock, as one `setStatus`/`setError` left them: two reads could pair "idle"
        // with the error of a failure already over.
        var (state, error) = folder.shown
        if state == .idle, let failing = folder.failing.state { state = failing }   // never idle while paths fail
        let totals = try index.liveTotals(folderID: folder.id)
        let connected = connectedDevices()
        let activity = folder.activity.snapshot
        let twins = folder.nameTwins.current
        var peers: [FolderPeer] = []
        let roles = try index.folderPeerRoles(folderID: folder.id)
        for member in try index.folderPeers(folderID: folder.id) {
            let comparison = try index.compareRemote(folderID: folder.id, deviceID: member.deviceID, counts: comparedPaths(folder, with: member.deviceID)) {
                VersionVector($0) != VersionVector($1)
            }
            let outFiles = comparison.outOfSyncFiles
            let total = max(1, max(comparison.liveEntries, totals.entries))
            guard let peer = memberRef(member.deviceID) else { continue }
            peers.append(FolderPeer(peer: peer, connected: connected.contains(member.deviceID),
                                    outOfSyncFiles: outFiles, outOfSyncBytes: comparison.outOfSyncBytes,
                                    percent: 100 * max(0, total - outFiles) / total,
                                    indexReceived: member.receivedSequence > 0,
                                    receivedBytes: activity.received[member.deviceID] ?? 0,
                                    sentBytes: activity.sent[member.deviceID] ?? 0,
                                    role: roles[member.deviceID]?.role ?? PeerRole.both.rawValue,
                                    noDeletes: roles[member.deviceID]?.noDeletes ?? false))
        }
        showAnnouncedSelections(&peers, folderID: folder.id)
        // The first of them: a status line stays bounded whatever the pull window holds.
        var current: [FolderPull] = activity.current.values.sorted { $0.path < $1.path }.prefix(Self.shownPulls).map { item in
            FolderPull(path: item.path, size: item.size, needed: item.needed, fetched: item.fetched,
                       percent: item.needed > 0 ? Int(100 * item.fetched / item.needed) : 100,
                       peers: item.peers.compactMap(memberRef))
        }
        // Files fetched ahead while a member hashes them (growing files): pulled too, from the
        // user's view, before their entry comes; `needed` is what the member has told so far.
        let pulling = Set(current.map { PathKey($0.path) })
        for ahead in folder.prefetch.progress().sorted(by: { $0.path < $1.path })
        where current.count < Self.shownPulls && !pulling.contains(PathKey(ahead.path)) {
            current.append(FolderPull(path: ahead.path, size: ahead.size, needed: ahead.told, fetched: ahead.fetched,
                                      percent: ahead.told > 0 ? Int(100 * ahead.fetched / ahead.told) : 0,
                                      peers: memberRef(ahead.device).map { [$0] } ?? []))
        }
        let differences = try folder.roleCounts(localDevice: localDevice)
        let damaged = folder.damagedFiles()
        return FolderStatus(folder: folder.id, label: folder.label, path: folder.root, state: state, error: error,
                            files: totals.files, bytes: totals.bytes, conflicts: try conflictCopies(folder.id).count,
                            peers: peers, transfers: current, reusedBytes: activity.reused, scannedBytes: activity.scanned,
                            failing: folder.failing.count, failures: Self.failures(of: folder),
                            normalizationTwins: twins.count, normalizationTwinNames: twins.names,
                            massChange: folder.massChangeInfo, notApplied: differences.notApplied,
                            locallyChanged: differences.locallyChanged, damaged: damaged.count,
                            damagedPaths: damaged.prefix(Self.shownDamaged).map(\.path),
                            prefetchedBytes: folder.prefetch.taken.load(ordering: .relaxed))
    }

    /// How many of the files being pulled `status` lists (by path).
    static let shownPulls = 50
    /// How many of the damaged files `status` lists (by path).
    static let shownDamaged = 20

    /// The first paths that cannot be pulled now: what, why, and when they are tried again.
    static func failures(of folder: SharedFolder) -> [PathFailure] {
        folder.failing.list(limit: 20).map { item in
            PathFailure(path: item.path, kind: item.failure.rawValue, reason: item.reason, retry: item.retry)
        }
    }

    /// A folder member as results show it (nil if the index has no valid ID for it).
    /// Best effort: a name the index cannot give shows as "?" (the list's own reads fail loudly).
    func memberRef(_ device: String) -> PeerRef? {
        let name = (try? index.peer(deviceID: device))??.name ?? "?"
        return try? PeerRef.indexed(device: device, name: name, index: index)
    }

    /// The live conflict copies of a folder, by path (found by the index, not by loading it).
    func conflictCopies(_ folderID: String) throws(IndexError) -> [String] {
        try index.livePaths(folderID: folderID, matching: ConflictName.glob).filter(ConflictName.isConflictName)
    }

    /// Share offers waiting for an answer: one page, by folder ID and peer.
    func shareOffers(_ page: PageRequest) throws(EngineError) -> ListPage<ShareOfferInfo> {
        let offers: [FolderOffer]
        do throws(IndexError) { offers = try index.folderOffers() } catch { throw .index(error) }
        var failure: IndexError?
        let answer = page.page(offers, key: { $0.folderID + "\u{0}" + $0.deviceID }) { offer -> ShareOfferInfo? in
            guard let peer = memberRef(offer.deviceID) else { return nil }
            // Offers stored by older versions may hold the label as the peer sent it.
            let label = FolderLabel.safeName(offer.label, fallback: offer.folderID)
            // Accepting lets that peer join a folder we have (not shown as a new one when the index cannot say).
            let joins: String?
            do throws(IndexError) { joins = try index.folder(id: offer.folderID)?.path } catch {
                failure = failure ?? error
                return nil
            }
            return ShareOfferInfo(folder: offer.folderID, label: label, peer: peer, joins: joins)
        }
        if let failure { throw .index(failure) }
        return answer
    }

    // MARK: - Life (queue)

    /// A failed read is an error event: the daemon runs (peers, transfers) but says why no
    /// folder syncs.
    func startFolders() {
        dispatchPrecondition(condition: .onQueue(queue))
        do throws(IndexError) {
            for record in try index.folders() { startFolder(record) }
        } catch {
            emit(.error(.init(peer: nil, reason: "cannot read the shared folders from the index, none syncs: \(error.description)",
                              time: Int64(Date().timeIntervalSince1970 * 1000))))
        }
    }

    func stopFolders() {
        let list = queue.sync {
            state.withLock { state -> [SharedFolder] in
                defer { state.folders = [:] }
                return Array(state.folders.values)
            }
        }
        for folder in list { folder.stop() }
    }

    func startFolder(_ record: FolderRecord) {
        dispatchPrecondition(condition: .onQueue(queue))
        // (Only `queue` adds folders: none comes between the check and the insert.)
        guard let config = state.withLock({ $0.folders[record.id] == nil ? $0.config : nil }) else { return }
        let folder = SharedFolder(id: record.id, root: record.path, label: record.safeLabel, host: self)
        folder.recoversVanished = config.afterPowerLoss
        folder.growing.threshold.store(config.growingFrom, ordering: .relaxed)
        folder.prefetch.expiry.withLock { $0 = config.prefetchExpiry }
        state.withLock { $0.folders[record.id] = folder }
        loadPeerSelections(record.id)
        folder.start(rescanInterval: config.rescanInterval, watchDelay: config.watchDelay)
    }

    private func answerShareOnQueue(_ folderID: String, accept: Bool, into directory: String?,
                                    selection: FolderSelection? = nil) throws(EngineError) -> FolderResult {
        dispatchPrecondition(condition: .onQueue(queue))
        let offers: [FolderOffer]
        do throws(IndexError) { offers = try index.folderOffers(folderID: folderID) } catch { throw .index(error) }
        guard let first = offers.first else { throw .notFound("no share offer '\(folderID)'; see 'syncpeer status'") }
        let devices = Set(offers.map(\.deviceID))
        guard accept else {
            do { _ = try index.removeFolderOffers(folderID: folderID) } catch { throw .index(error) }
            let link = link
            for session in link?.connectedSessions() ?? [] where devices.contains(session.deviceKey) {
                link?.send([.shareAnswer(folder: folderID, accepted: false, reason: "declined")], on: session.id)
            }
            return FolderResult(folder: folderID, accepted: false)
        }
        let existing: FolderRecord?
        do throws(IndexError) { existing = try index.folder(id: folderID) } catch { throw .index(error) }
        if let existing {
            guard selection == nil else { throw .invalidArgument("\(existing.path) is shared already: change what it holds with 'syncpeer select'") }
            // We share this folder already (with another peer): the new peer joins it, no
            // new directory is made, and it becomes one more source for pulls.
            do {
                try index.addFolderPeers(folderID: folderID, deviceIDs: devices.sorted(), removingOffers: true)
            } catch { throw .wrapping(error) }
            acceptedShare(folderID, label: existing.safeLabel, path: existing.path, devices: devices)
            return FolderResult(folder: folderID, path: existing.path, accepted: true)
        }
        // The label is the peer's: a safe name (again: offers stored by older versions).
        let label = FolderLabel.safeName(first.label, fallback: folderID)
        let path: String
        if let directory {
            // The user's own choice, as typed.
            path = URL(fileURLWithPath: directory).standardizedFileURL.path
            do {
                try DurableNames.createDirectories(path)
            } catch {
                throw .io(path: path, reason: "cannot create it")
            }
        } else {
            path = try makeReceivedFolder(named: label)
        }
        // The folder, its peers and the end of the offers in one transaction, then the root
        // (marker, identity): a daemon killed in between finds the folder accepted and adopts
        // its root when it starts it. (Written one by one, a kill before the peers left a
        // folder no peer shared, which no peer's offer could join without asking: it never
        // synced.)
        let record: FolderRecord
        do {
            record = try index.addFolder(id: folderID, path: path, label: label, sharedWith: devices.sorted(), removingOffers: true)
            if let selection { try index.setSelection(folderID: folderID, paths: selection.paths) }
        } catch { throw .wrapping(error) }
        do throws(EngineError) { try adoptRoot(of: record) } catch {
            // adoptRoot removed the folder again: the offers come back, to be accepted elsewhere.
            restoreOffers(offers)
            throw error
        }
        startFolder(record)
        acceptedShare(folderID, label: record.label, path: record.path, devices: devices)
        return FolderResult(folder: folderID, path: path, accepted: true)
    }

    /// Records `offers` again (an accept that failed after it had removed them).
    private func restoreOffers(_ offers: [FolderOffer]) {
        for offer in offers {
            do { try index.recordFolderOffer(folderID: offer.folderID, deviceID: offer.deviceID, label: offer.label) } catch {
                // The peer offers it again when it reconnects.
                emitError(nil, "folder \(offer.folderID): cannot record the share offer again: \(error.description)")
            }
        }
    }

    /// Tells the connected offering peers yes, sends them our index, and says so.
    private func acceptedShare(_ folderID: String, label: String, path: String, devices: Set<String>) {
        let link = link
        for session in link?.connectedSessions() ?? [] where devices.contains(session.deviceKey) {
            link?.send([.shareAnswer(folder: folderID, accepted: true, reason: "")], on: session.id)
            sendIndex(folderID, to: session)
            announceSelection(folderID, to: session)
        }
        emit(.folder(.init(folder: folderID, name: label, state: .shared, path: path, time: now())))
    }

    // MARK: - Session hooks (queue)

    /// A member connected: offer its folders again and retry what waited for a peer.
    func sessionConnected(_ session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        noteConnectedSessions()
        let link = link
        let shared: [(id: String, record: FolderRecord?)]
        do throws(IndexError) {
            shared = try index.folderIDs(sharedWith: session.deviceKey).map { id throws(IndexError) in (id, try index.folder(id: id)) }
        } catch {
            // Said; its folders are offered again when it next connects.
            return emitError(session.peer, "cannot read its shared folders from the index, none is offered: \(error.description)")
        }
        for (folderID, found) in shared {
            guard let record = found else { continue }
            // Offering again is harmless: a peer that shares it already answers "accepted".
            link?.send([.shareOffer(folder: folderID, label: record.safeLabel)], on: session.id)
            announceSelection(folderID, to: session)
            let folder = state.withLock { state in
                state.sent["\(folderID)|\(session.deviceKey)"] = nil
                return state.folders[folderID]
            }
            // Pulls that failed for want of a peer are tried again now, not at the next rescan.
            folder?.peerConnected()
        }
    }

    /// A session ended: its pending block requests fail, its parked ones are dropped.
    func sessionClosed(_ session: LinkSession) {
        // Taken again once the block that ended it is done: a duplicate session is ended just
        // before its successor connects, in one block, and the device stays connected.
        dispatchPrecondition(condition: .onQueue(queue))
        queue.async { [weak self] in self?.noteConnectedSessions() }
        let (parked, failed) = state.withLock { state in
            state.refusedBlocks[session.id] = nil
            state.quotaReported[session.id] = nil
            state.quotaHeadroom.forget(device: session.deviceKey)
            state.refusedShareOffers[session.id] = nil
            state.indexBlocks[session.id] = nil
            let parked = state.parked.removeValue(forKey: session.id)?.count ?? 0
            let failed = state.pendingBlocks.filter { $0.value.device == session.deviceKey }
            for request in failed.keys { state.pendingBlocks[request] = nil }
            return (parked, failed.values.map(\.callback))
        }
        for _ in 0..<parked { session.flow.handled(0) }
        forgetIndexBlockWindow(session)
        for callback in failed { callback(nil) }
    }

    // MARK: - Frames (queue)

    /// Handles a folder frame from `session`; false for any other frame.
    func frameReceived(_ frame: Frame, from session: LinkSession) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        switch frame {
        case let .shareOffer(folderID, offered):
            let link = link
            // Our folder IDs are safe names; another is refused before it is stored or shown.
            guard FolderLabel.isSafe(folderID) else {
                link?.send([.shareAnswer(folder: folderID, accepted: false, reason: "invalid folder ID")], on: session.id)
                emitError(session.peer, "refused a share offer with an invalid folder ID")
                return true
            }
            let label = FolderLabel.safeName(offered, fallback: folderID)
            let ours: Bool
            let already: Bool
            do throws(IndexError) {
                ours = try index.folder(id: folderID) != nil
                already = try index.folderOffers(folderID: folderID).contains { $0.deviceID == session.deviceKey }
            } catch {
                // Not answered (not taken for a new folder): the peer offers it again when it reconnects.
                emitError(session.peer, "folder \(label): cannot read the index to answer the share offer: \(error.description)")
                return true
            }
            if ours, isMember(session.deviceKey, of: folderID) {
                link?.send([.shareAnswer(folder: folderID, accepted: true, reason: "")], on: session.id)
                sendIndex(folderID, to: session)
                return true
            }
            if !already, let refusal = shareOfferRefusal(from: session) {
                link?.send([.shareAnswer(folder: folderID, accepted: false, reason: refusal)], on: session.id)
                shareOfferRefused(refusal, from: session)
                return true
            }
            do { try index.recordFolderOffer(folderID: folderID, deviceID: session.deviceKey, label: label) } catch {
                // Not recorded: 'syncpeer accept' would not find it. The peer offers it again
                // when it reconnects.
                emitError(session.peer, "folder \(label): cannot record the share offer in the index: \(error.description)")
                return true
            }
            if !already {
                emit(.shareOffer(.init(peer: session.peer, folder: folderID, name: label, time: now())))
            }
            // Auto-accept takes new folders only (into the receive folder), and only from a
            // peer whose folders switch is on (files on is not enough: a folder syncs both
            // ways). A peer asking to join a folder we have already would get our copy: that
            // is always asked.
            // (A peer switch the index cannot give reads as off: the offer waits for the user.)
            if config.autoAccept || ((try? index.peer(deviceID: session.deviceKey))??.autoAcceptFolders ?? false), !ours {
                do throws(EngineError) {
                    _ = try answerShareOnQueue(folderID, accept: true, into: nil)
                } catch {
                    emitError(session.peer, "folder \(label): cannot accept it automatically: \(error)")
                }
            }
        case let .shareAnswer(folderID, accepted, reason):
            // A refusal from the peer whose offer we have not answered yet: it stopped sharing
            // the folder (unshare), so the offer goes ('syncpeer accept' no longer finds it).
            if !accepted, FolderLabel.isSafe(folderID) {
                do {
                    if try index.removeFolderOffers(folderID: folderID, deviceID: session.deviceKey) > 0 {
                        emit(.folder(.init(folder: folderID, peer: session.peer, state: .unshared,
                                           reason: "\(session.peer.name) stopped sharing it before it was accepted", time: now())))
                    }
                } catch {
                    emitError(session.peer, "folder \(folderID): cannot remove the withdrawn share offer: \(error.description)")
                }
            }
            guard isMember(session.deviceKey, of: folderID) else { return true }
            if accepted {
                // Whatever we sent before the peer accepted was ignored: start again from
                // its last acknowledgement.
                state.withLock { $0.sent["\(folderID)|\(session.deviceKey)"] = nil }
                sendIndex(folderID, to: session)
                announceSelection(folderID, to: session)
            } else {
                forgetPeerSelections(folderID, device: session.deviceKey)
                do { _ = try index.removeFolderPeer(folderID: folderID, deviceID: session.deviceKey) } catch {
                    emitError(session.peer, "folder \(folderID): cannot record that the peer left it: \(error.description)")
                }
                emit(.folder(.init(folder: folderID, peer: session.peer, state: .unshared, reason: reason, time: now())))
            }
        case let .indexUpdate(folderID, _, entries):
            indexReceived(folderID, entries: entries, from: session)
        case let .indexBlocks(folderID, blocks):
            // Held for the session's next index page of that folder (`indexReceived` takes
            // it), only from a member of a folder we have.
            guard state.withLock({ $0.folders[folderID] != nil }), isMember(session.deviceKey, of: folderID) else { return true }
            state.withLock { state in
                if state.indexBlocks[session.id]?.folder != folderID { state.indexBlocks[session.id] = HeldBlocks(folder: folderID) }
                state.indexBlocks[session.id]?.append(blocks)
            }
        case let .indexAck(folderID, sequence):
            do { try index.setAckedSequence(folderID: folderID, deviceID: session.deviceKey, Int64(clamping: sequence)) } catch {
                // The peer's acknowledgement is lost: what it already has is sent again later.
                emitError(session.peer, "folder \(folderID): cannot record the peer's acknowledgement: \(error.description)")
            }
            indexBlocksAcked(folderID, sequence: Int64(clamping: sequence), from: session)
        case let .blockRequest(request, folderID, _, _, _, _), let .blockDeltaRequest(request, folderID, _, _, _, _, _):
            // One row looked up, not the folder's member list (B: 10,000 requests); one turn
            // of the lock for all this request needs of the table.
            let (found, waiting, link) = state.withLock { ($0.folders[folderID], !($0.parked[session.id] ?? []).isEmpty, $0.link) }
            guard let folder = found, isMember(session.deviceKey, of: folderID) else {
                link?.send([.blockResponse(request: request, ok: false, data: [])], on: session.id)
                blockRefused(to: session, folder: nil)
                return true
            }
            serveBlock(frame, from: folder, to: session, behindParked: waiting)
        case let .versionRequest(request, folderID, path, tree, before, version):
            serveVersionRequest(request, folderID: folderID, path: path, tree: tree, before: before, version: version, from: session)
        case let .versionResponse(request, ok, data):
            versionResponseReceived(request, ok: ok, data: data, from: session)
        case let .folderSelection(folderID, paths):
            selectionReceived(folderID, paths: paths, from: session)
        case let .chunkHave(folderID, path, root, count, bitmap):
            heldChunksReceived(folderID, path: path, root: root, count: count, bitmap: bitmap, from: session)
        case let .growingFile(folderID, path, scan, size, offset, chunks):
            growingFileReceived(folderID, path: path, scan: scan, size: size, offset: offset, chunks: chunks, from: session)
        case let .blockResponse(request, ok, data):
            // Only the asked peer's answer settles a request: another's (a guessed or stale
            // ID) is dropped, and the request stays for its answer or its timeout. (Removed
            // first, a request answered by another peer never called back: the pull waiting
            // for it, and the folder's io with it, waited for ever.)
            let answered = state.withLock { state -> PendingBlock? in
                guard state.pendingBlocks[request]?.device == session.deviceKey else { return nil }
                return state.pendingBlocks.removeValue(forKey: request)
            }
            guard let pending = answered else { return true }
            // An answer longer than what was asked is a lie (it fails the hash as an empty one
            // does), and is not hashed: up to 16 MiB for each of 1,024 small blocks in flight.
            pending.callback(ok ? (data.count <= pending.limit ? data : []) : nil)
        default:
            return false
        }
        return true
    }

    // MARK: - For the folders (any thread)

    /// A folder's local index changed: send the new entries to its connected peers.
    func folderChanged(_ folderID: String) {
        queue.async { [self] in
            for session in connectedMembers(of: folderID) {
                sendIndex(folderID, to: session)
            }
        }
    }

    /// Device keys of connected peers (any thread).
    func connectedDevices() -> Set<String> {
        connected.withLock { $0 }
    }

    /// Takes the connected sessions' devices again (on `queue`, from the session hooks).
    private func noteConnectedSessions() {
        let devices = Set((link?.connectedSessions() ?? []).map(\.deviceKey))
        connected.withLock { $0 = devices }
    }

    /// A folder's state changed (on `queue`: the folder's status is read there).
    func emitFolder(_ folder: SharedFolder, reason: String?) {
        dispatchPrecondition(condition: .onQueue(queue))
        emit(.folder(.init(folder: folder.id, name: folder.label, state: folder.status, path: folder.root, reason: reason,
                           time: now())))
    }

    func emitFile(_ folder: SharedFolder, _ path: String, _ state: NodeEvent.FileSyncState,
                  bytes: Int64?, total: Int64?, copy: String?, reason: String?) {
        let change = NodeEvent.FileChange(folder: folder.id, name: folder.label, path: path, state: state, bytes: bytes,
                                          total: total, copy: copy, reason: reason, time: 0)
        queue.async { [self] in
            var stamped = change
            stamped.time = now()
            emit(.file(stamped))
        }
    }

    static func newFolderID() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        let chars = (0..<10).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] }
        return String(chars[0..<5]) + "-" + String(chars[5..<10])
    }
}

internal import PeerModel
internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// The index exchange with members: their pages received and stored (`indexReceived`), ours
/// sent a page at a time (`sendIndex`).
extension FolderService {
    /// Stores a member's index page (`Frame.indexUpdate`, on `queue`), within its quota.
    func indexReceived(_ folderID: String, entries: [SyncFileEntry], from session: LinkSession) {
        // The content that came just before this page is for this page only.
        let (held, found) = state.withLock { ($0.indexBlocks.removeValue(forKey: session.id), $0.folders[folderID]) }
        let blocks = held?.folder == folderID ? held : nil
        guard let folder = found, isMember(session.deviceKey, of: folderID) else { return }
        // The quota first, on the paths as sent: a page past it is refused before any entry
        // is checked, decoded or kept (1,000,000 tombstones past it cost 51.7 CPU-s).
        guard withinIndexQuota(Set(entries.map { PathKey($0.path) }), folder: folder, from: session) else { return }
        var records: [RemoteFileRecord] = []
        var paths = Set<PathKey>()
        var highest: Int64 = 0
        var bytes = 0
        /// Hash → size of the single chunk of each small file of the page.
        var small: [ChunkHash: Int] = [:]
        for entry in entries {
            highest = max(highest, entry.sequence)
            // Hostile input: a path must stay inside the folder; a live file needs a manifest
            // that matches its root hash and size.
            guard (try? SafePath(entry.path)) != nil else {
                emitError(session.peer, "folder \(folder.label): ignored an index entry with an unsafe path")
                continue
            }
            var manifest: [UInt8]?
            if entry.kind == .file && !entry.deleted {
                guard let decoded = try? Manifest.decode(entry.manifest), decoded.rootHash == entry.rootHash,
                      decoded.fileSize == UInt64(entry.size) else {
                    emitError(session.peer, "folder \(folder.label): ignored \(entry.path): its manifest does not match")
                    continue
                }
                manifest = entry.manifest
                if blocks != nil, decoded.chunks.count == 1, let chunk = decoded.chunks.first,
                   chunk.size <= UInt32(SharedFolder.indexBlockLimit) {
                    small[chunk.hash] = Int(chunk.size)
                }
            }
            records.append(RemoteFileRecord(entry.entry, manifest: manifest))
            paths.insert(PathKey(entry.path))
            bytes += entry.encodedSize
        }
        // Matched (hashed) before the entries are stored: a pull planning them from then on
        // finds the blocks with the page soon after (`FolderApplier.indexBlock`).
        let content = blocks.map { SharedFolder.matchIndexBlocks($0.blocks, wanted: small, device: session.deviceKey) } ?? [:]
        do {
            try index.upsertRemoteFiles(folderID: folderID, deviceID: session.deviceKey, records, receivedSequence: highest)
        } catch {
            emitError(session.peer, "folder \(folder.label): cannot store the peer's index: \(error)")
            return
        }
        // A page whose content is held is acknowledged once a pull takes it (IndexBlockWindow).
        let ack = Frame.indexAck(folder: folderID, sequence: UInt64(max(0, highest)))
        folder.pullSoon(paths, bytes: bytes, blocks: content, from: session.deviceKey) { [weak self] in
            guard let self else { return }
            queue.async { self.link?.send([ack], on: session.id) }
        }
    }

    /// Sends the local index entries the peer has not seen yet (since its last ack, or what
    /// was already sent in this run), in frames of at most 1,000 entries, one frame at a
    /// time: the next page is read once the last one is written to the connection, so a
    /// large index is never queued in memory at once. While a pass runs for the session,
    /// another call changes nothing: each page starts from `sent`, which picks up new
    /// entries and a reset (the peer accepted the share only now) alike.
    func sendIndex(_ folderID: String, to session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard state.withLock({ $0.sending.insert("\(folderID)|\(session.id)").inserted }) else { return }
        sendIndexPage(folderID, to: session, full: false)
    }

    func sendIndexPage(_ folderID: String, to session: LinkSession, full: Bool) {
        dispatchPrecondition(condition: .onQueue(queue))
        let pass = "\(folderID)|\(session.id)"
        let key = "\(folderID)|\(session.deviceKey)"
        // A peer that left the folder gets no more of its entries (nor their content). (An
        // index that cannot say sends from the start, as before.)
        var acked: Int64 = 0
        do {
            guard let member = try index.folderPeer(folderID: folderID, deviceID: session.deviceKey) else { return endIndexPass(pass) }
            acked = member.ackedSequence
        } catch {}
        let (sent, lastLimit, link) = state.withLock { ($0.sent[key], $0.pageLimit[pass], $0.link) }
        let since = max(sent ?? 0, acked)
        let full = full || since == 0
        // How many records to read: what the last page held, doubled while pages are not cut
        // by bytes (a pass starts small, so a folder of large files' manifests is not read
        // 1,000 at a time — 720 MB for 1 GiB files — only to send a few).
        let limit = lastLimit ?? Self.firstIndexRead
        // Our own changes stay here for a peer we are receive-only towards (FolderRoles.sends).
        // An index that cannot be read holds the pass, said once, and it goes on later
        // (`indexPassFailed`; an empty page would end it silently; unfiltered, a
        // receive-only peer would get ours).
        let records: [FileRecord]
        let sendable: [FileRecord]
        do throws(IndexError) {
            records = link?.session(session.id)?.isConnected == true ? try index.files(folderID: folderID, since: since, limit: limit) : []
            sendable = records.isEmpty ? [] : try roleFiltered(records, folderID: folderID, to: session.deviceKey)
        } catch {
            return indexPassFailed(folderID, to: session, full: full, error)
        }
        let page = Self.indexPage(sendable.map(Self.wireEntry), budget: Self.indexPageBytes)
        let cut = page.count < sendable.count
        let pageRecords = sendable.prefix(page.count)
        let last = (cut ? pageRecords.last : records.last)?.sequence
        let carrier = state.withLock { state in
            state.indexRetry.read(pass)
            state.pageLimit[pass] = cut ? max(1, page.count) : min(Self.indexBatch, 2 * limit)
            if let last { state.sent[key] = max(last, since) }
            return state.folders[folderID]
        }
        let update = Frame.indexUpdate(folder: folderID, full: full, entries: page)
        // The content of its small files goes first, for a peer that takes it: no block
        // request and answer per file (B: 10,000 of each).
        guard !page.isEmpty, session.indexBlocks, SharedFolder.mayCarryBlocks(pageRecords, localDevice: localDevice),
              let carrier else {
            if !page.isEmpty { link?.send([update], on: session.id) }
            guard records.count == limit || cut else { return endIndexPass(pass) }
            sendIndexPageLater(folderID, to: session, full: full)
            return
        }
        // Read on the folder's serve queue (the disk is no work for the node's queue); the
        // page waits for it, and goes with its blocks from the node's queue once the folder
        // is still shared with the peer (it may have been unshared, or the peer left it,
        // meanwhile). The pass goes on after it even if this was its last page: a page read
        // then sends what changed meanwhile, or ends the pass. (Ended now, it would let
        // another pass send newer entries before this page: a path's older entry after its
        // newer one.)
        let localDevice = localDevice
        carrier.serveQueue.async { [self] in
            let blocks = carrier.indexBlocks(for: Array(pageRecords), localDevice: localDevice)
            queue.async { [self] in
                let current = state.withLock { $0.folders[folderID] }
                guard current === carrier, isMember(session.deviceKey, of: folderID) else {
                    return endIndexPass(pass)
                }
                if !blocks.isEmpty { carrier.activity.served(to: session.deviceKey, bytes: blocks.reduce(0) { $0 + $1.count }) }
                sendIndexPage(SharedFolder.indexBlockFrames(blocks, folder: folderID) + [update], sequence: page.map(\.sequence).max() ?? 0,
                              cost: SharedFolder.heldCost(of: blocks), folderID: folderID, to: session, full: full, carrier: carrier)
            }
        }
    }

    /// Whether `device` is a member of the folder (one row of the index: a folder's member
    /// list is not read for every frame; an index that cannot say answers no: every caller
    /// then refuses the peer's frame or request, which changes nothing here).
    func isMember(_ device: String, of folderID: String) -> Bool {
        ((try? index.folderPeer(folderID: folderID, deviceID: device)) ?? nil) != nil
    }

    /// Ends the index pass `pass` ("folder|session ID"; on `queue`).
    func endIndexPass(_ pass: String) {
        state.withLock { state in
            state.indexRetry.read(pass)
            state.pageLimit[pass] = nil
            state.sending.remove(pass)
        }
    }

    /// The pass's next page, once what the session has queued is written (any thread).
    func sendIndexPageLater(_ folderID: String, to session: LinkSession, full: Bool) {
        session.frames.afterQueuedSends { [weak self] in
            guard let self else { return }
            queue.async { self.sendIndexPage(folderID, to: session, full: full) }
        }
    }

    /// The most bytes of entries in one `indexUpdate` frame (the frame's limit is 16 MiB):
    /// a page of 1,000 large files' manifests (a 1 GiB file's is ~300 KB) is split.
    static let indexPageBytes = 4 << 20
    /// Records read for a pass's first page (then doubled up to `indexBatch`).
    static let firstIndexRead = 100

    /// The longest prefix of `entries` (in sequence order) that fits `budget` bytes, and
    /// never less than one entry (one entry always fits a frame: its manifest is at most
    /// `WireLimits.maxManifest`). Before, a page over the frame limit was refused by the
    /// channel before sending, and its entries were never sent.
    static func indexPage(_ entries: [SyncFileEntry], budget: Int) -> [SyncFileEntry] {
        var used = 0
        var count = 0
        for entry in entries {
            used += entry.encodedSize
            if count > 0 && used > budget { break }
            count += 1
        }
        return Array(entries.prefix(count))
    }

    static func wireEntry(_ record: FileRecord) -> SyncFileEntry {
        SyncFileEntry(record.entry, manifest: record.manifest?.encode() ?? [])
    }
}

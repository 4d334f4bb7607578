#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import PeerNet
internal import PeerWire

/// The node's side of its services: the public calls (the control server's and the Swift
/// API's), which resolve peers' names and hand the rest to `TransferService` or
/// `FolderService`.
extension Node {
    /// Sends a file or folder (or a spooled stream) to a paired peer. The observer sees
    /// progress and then the end (completed, declined, failed).
    package func send(path: String, to peerText: String, name: String?, spoolFile: String?,
                     cancellation: SendCancellation? = nil,
                     observer: @escaping @Sendable (NodeEvent) -> Void,
                     completion: @escaping @Sendable (Result<TransferInfo, EngineError>) -> Void) {
        let resolved: Result<TransferService.Target, EngineError> = queue.sync {
            do throws(EngineError) {
                if let session = try? connectedSession(for: peerText) {
                    return .success(.init(sessionID: session.id, deviceKey: session.deviceKey, peer: session.peer))
                }
                let record = try pairedPeer(for: peerText)
                return .success(.init(sessionID: nil, deviceKey: record.deviceID, peer: try peerRef(record)))
            } catch { return .failure(error) }
        }
        switch resolved {
        case let .failure(error): completion(.failure(error))
        case let .success(target):
            transfers.send(path: path, to: target, name: name, spoolFile: spoolFile, cancellation: cancellation,
                           observer: observer, completion: completion)
        }
    }

    /// Waits for the next offer and accepts it into `directory` (or declines it).
    package func receiveNext(directory: String?, accept: Bool,
                            observer: @escaping @Sendable (NodeEvent) -> Void,
                            completion: @escaping @Sendable (Result<TransferInfo, EngineError>) -> Void) {
        transfers.receiveNext(directory: directory, accept: accept, observer: observer, completion: completion)
    }

    /// Accepts or declines an offer by transfer ID (or a unique prefix of at least 4 hex digits).
    package func answerOffer(_ idText: String, accept: Bool, directory: String?,
                            observer: (@Sendable (NodeEvent) -> Void)? = nil,
                            completion: (@Sendable (Result<TransferInfo, EngineError>) -> Void)? = nil) throws(EngineError) -> TransferInfo {
        try transfers.answerOffer(idText, accept: accept, directory: directory, observer: observer, completion: completion)
    }

    /// Cancels a transfer in either direction; a receiver's partial data is removed.
    package func cancelTransfer(_ idText: String) throws(EngineError) -> TransferInfo {
        try transfers.cancelTransfer(idText)
    }

    /// Offers paused outgoing transfers again (to peers that are connected).
    package func resumeTransfers(_ idText: String?) throws(EngineError) -> ResumeResult {
        try transfers.resumeTransfers(idText)
    }

    /// Active transfers (live) and finished ones (from the index), newest first: one page.
    package func transferList(_ page: PageRequest = .everything) throws(EngineError) -> ListPage<TransferInfo> {
        try transfers.transferList(page)
    }

    /// Transfers recorded in a home's index, for `syncpeer transfers` when no daemon runs.
    package static func recordedTransfers(home: NodeHome) throws(EngineError) -> [TransferInfo] {
        let index = try NodeSetup.openIndex(home)
        let records: [TransferRecord]
        do throws(IndexError) { records = try index.transfers() } catch { throw .index(error) }
        return records.map { TransferService.recordEvent($0, store: index) }
    }
}

extension Node {
    /// Shares a folder with paired peers (adding peers to an already shared folder).
    /// With `only`, a new folder holds only those subtrees here (`share --only`, `select`).
    package func share(directory: String, with peerTexts: [String], role: String? = nil, noDeletes: Bool? = nil,
                      only: [String]? = nil) throws(EngineError) -> ShareResult {
        let role = try role.map(Self.peerRole)
        // What is wrong with the folder first: a typo in the path is the likelier mistake.
        try FolderService.checkShareable(directory)
        let resolved: Result<[(key: String, name: String)], EngineError> = queue.sync {
            do throws(EngineError) {
                var devices: [(key: String, name: String)] = []
                for text in peerTexts {
                    let candidate = try resolve(text)
                    let key = candidate.deviceID.filter { $0 != "-" }
                    let record: PeerRecord?
                    do throws(IndexError) { record = try index.peer(deviceID: key) } catch { throw .index(error) }
                    guard record?.trust == .paired else {
                        throw .notFound("\(candidate.name) is not paired; pair first")
                    }
                    devices.append((key, candidate.name))
                }
                return .success(devices)
            } catch { return .failure(error) }
        }
        return try folders.share(directory: directory, with: try resolved.get(), role: role, noDeletes: noDeletes, only: only)
    }

    /// `select DIR [PATH ...]`: the subtrees this node holds of a folder; with `paths`,
    /// changes them (empty: the whole folder), freeing or fetching what changed.
    package func select(directory: String, paths: [String]?) throws(EngineError) -> SelectionResult {
        try folders.select(directory: directory, paths: paths)
    }

    /// `tree DIR [PATH]`: one level of the folder's tree as the cluster has it, paged.
    package func tree(directory: String, path: String?, page: PageRequest = .everything) throws(EngineError) -> ListPage<TreeItem> {
        try folders.tree(directory: directory, path: path, page: page)
    }

    /// Stops sharing a folder: nothing on disk changes; peers are told.
    package func unshare(directory: String) throws(EngineError) -> FolderResult {
        try folders.unshare(directory: directory)
    }

    /// Accepts (into `directory`, default `<receive folder>/<label>`) or declines a share offer.
    /// With `only`, the folder holds only those subtrees here (`accept --only`, `select`).
    package func answerShare(_ folderID: String, accept: Bool, into directory: String?, only: [String]? = nil) throws(EngineError) -> FolderResult {
        try folders.answerShare(folderID, accept: accept, into: directory, only: only)
    }

    /// `syncpeer confirm DIR`: adopt the folder as it is now, deletions included.
    package func confirmFolder(directory: String) throws(EngineError) -> FolderResult {
        try folders.confirmFolder(directory: directory)
    }

    /// `syncpeer rescan DIR [PATH]`: scans the folder (or one path in it) now.
    package func rescanFolder(directory: String, path: String?) throws(EngineError) -> FolderResult {
        try folders.rescanFolder(directory: directory, path: path)
    }

    /// `syncpeer pause DIR` (true) / `resume-folder DIR` (false).
    package func setFolderPaused(directory: String, _ on: Bool) throws(EngineError) -> FolderResult {
        try folders.setPaused(directory: directory, on)
    }

    /// A folder's own ignore patterns; with `patterns`, replaces them (`ignores`).
    package func ignorePatterns(directory: String, replacingWith patterns: String?) throws(EngineError) -> IgnoresResult {
        try folders.ignorePatterns(directory: directory, replacingWith: patterns)
    }

    /// `syncpeer verify DIR`: re-hash every file and repair what does not match the index.
    package func verifyFolder(directory: String) throws(EngineError) -> VerifyResult {
        try folders.verifyFolder(directory: directory)
    }

    /// Per folder: state, counts, and per peer what is out of sync.
    /// An index that cannot be read fails it with its cause.
    package func folderStatus() throws(EngineError) -> [FolderStatus] {
        try folderStatus(.everything).items
    }

    /// One page of `folderStatus()`, by label.
    package func folderStatus(_ page: PageRequest) throws(EngineError) -> ListPage<FolderStatus> {
        withPaths(try folders.folderStatus(page))
    }

    /// Share offers waiting for an answer: one page, by folder ID.
    package func shareOffers(_ page: PageRequest = .everything) throws(EngineError) -> ListPage<ShareOfferInfo> {
        try folders.shareOffers(page)
    }

    /// Conflicted files in every shared folder, with their versions by device.
    package func conflicts() throws(EngineError) -> [ConflictInfo] {
        try folders.conflicts(.everything, localName: identity.displayName).items
    }

    /// One page of `conflicts()`, by folder label and path.
    package func conflicts(_ page: PageRequest) throws(EngineError) -> ListPage<ConflictInfo> {
        try folders.conflicts(page, localName: identity.displayName)
    }

    /// Settles a conflict on `path`: keep one device's version (`keep` names it, as
    /// `ConflictChoice` reads it), the others kept in the versions store, or `both`.
    package func resolveConflict(path: String, keep: String) throws(EngineError) -> ResolveResult {
        try folders.resolveConflict(path: path, keep: keep, localName: identity.displayName)
    }
}

extension Session {
    /// This session as the services above the sessions see it.
    var link: LinkSession {
        LinkSession(id: id, deviceKey: deviceKey, peer: peer, isConnected: machine.state == .connected,
                    chunks: channel, flow: flow, frames: self,
                    blockDelta: channel.remoteHello.features.contains(FolderService.blockDeltaFeature),
                    indexBlocks: channel.remoteHello.features.contains(FolderService.indexBlocksFeature),
                    streamedManifest: channel.remoteHello.features.contains(TransferService.streamedManifestFeature),
                    resentBytes: channel.remoteHello.features.contains(TransferService.resentBytesFeature),
                    selection: channel.remoteHello.features.contains(FolderService.selectionFeature),
                    chunkHave: channel.remoteHello.features.contains(FolderService.chunkHaveFeature),
                    growingFiles: channel.remoteHello.features.contains(FolderService.growingFilesFeature))
    }
}

extension Session: FrameSender {}

extension Node {
    /// The manifest a shared folder's local index holds for the file at `absolutePath`, if
    /// that file lies in a shared folder and its size, mtime and inode are still the ones
    /// the index recorded when it hashed it (the scanner's own test of an unchanged file);
    /// nil otherwise. Lets `send` of an indexed file skip reading and hashing it again. Runs
    /// off the node's queue (the index serialises its own access).
    static func indexedManifest(_ absolutePath: String, _ stamp: PreparedOffer.FileStamp, in index: NodeIndex) -> Manifest? {
        guard let real = realpath(absolutePath, nil) else { return nil }
        let file = String(cString: real)
        free(real)
        // Best effort: without the index's manifest the file is read and hashed, as any other.
        guard let folders = try? index.folders() else { return nil }
        for folder in folders {
            guard let rootReal = realpath(folder.path, nil) else { continue }
            let root = String(cString: rootReal)
            free(rootReal)
            let prefix = root.hasSuffix("/") ? root : root + "/"
            guard file.hasPrefix(prefix) else { continue }
            let relative = String(file.dropFirst(prefix.count))
            // (Best effort, as above.)
            guard let record = try? index.file(folderID: folder.id, path: relative),
                  record.kind == .file, !record.deleted, record.size == stamp.size,
                  record.mtimeNs == stamp.mtimeNs, record.inode == stamp.inode,
                  let manifest = record.manifest else { continue }
            return manifest
        }
        return nil
    }
}

internal import Dispatch
internal import PeerIndex

/// What a shared folder (`SharedFolder`, `FolderApplier`) needs of the engine around it:
/// `FolderService` plays it; `FolderHostTests` play it with an in-memory index and blocks served
/// from a directory, without sessions or processes. The folder never reaches the node's
/// sessions, tables or queue otherwise.
protocol FolderHost: AnyObject, Sendable {
    /// This device's compact ID: the counter our changes bump in version vectors.
    var localDevice: String { get }
    /// The index the folder's files and the peers' indexes live in.
    var index: NodeIndex { get }
    /// The serial queue where a folder's status and error are kept (the node's).
    var queue: DispatchQueue { get }
    /// The folder's local index changed: its peers are sent the new entries. Any thread.
    func folderChanged(_ folderID: String)
    /// The folder's state changed (on `queue`).
    func emitFolder(_ folder: SharedFolder, reason: String?)
    /// What a pull did to one of the folder's files (`NodeEvent.file`). Any thread: the
    /// event goes out on `queue`, after the folder states set before it.
    func emitFile(_ folder: SharedFolder, _ path: String, _ state: NodeEvent.FileSyncState,
                  bytes: Int64?, total: Int64?, copy: String?, reason: String?)
    /// Something the user should know (on `queue`).
    func emitError(_ peer: PeerRef?, _ reason: String)
    /// Devices connected now (never called on `queue`).
    func connectedDevices() -> Set<String>
    /// Asks peers for blocks, each `BlockWant`'s callback getting its answer, or nil
    /// (refused, timed out, gone). With `sums` (`BlockDelta.sums` of what our own file holds
    /// at that range), a peer that speaks `block-delta` answers with a delta
    /// (`BlockReply.delta`). The folder verifies what it gets. Many at once cost one hop to
    /// the node's queue and one send per peer. Any thread.
    func requestBlocks(_ wants: [BlockWant])
    /// What small files' content that came with the peers' index pages may take in memory
    /// while it waits for its pull, for every folder of the node.
    var indexBlockBudget: IndexBlockBudget { get }
    /// Where replaced versions are kept (nil: nowhere, as in hosts without a home).
    var versions: VersionKeeper? { get }
    /// Tells the members that take it which chunks of a file being fetched we hold now
    /// (`Frame.chunkHave`). Any thread.
    func announceHeld(_ folder: SharedFolder, _ note: HeldChunks.Note)
    /// Tells the members that take it which chunks of a file our scan hashes it has cut so far
    /// (`Frame.growingFile`). Any thread.
    func announceGrowing(_ folder: SharedFolder, _ note: GrowingFiles.Note)
}

extension FolderHost {
    /// Asks `device` for one block (`requestBlocks`).
    func requestBlock(device: String, folder: String, path: String, offset: UInt64, size: UInt32, hash: [UInt8],
                      sums: [UInt8]?, callback: @escaping @Sendable (BlockReply?) -> Void) {
        requestBlocks([BlockWant(device: device, folder: folder, path: path, offset: offset, size: size, hash: hash, sums: sums,
                                 callback: callback)])
    }
}

/// A block asked of a peer (`FolderHost.requestBlocks`).
struct BlockWant: Sendable {
    let device: String
    let folder: String
    let path: String
    let offset: UInt64
    let size: UInt32
    let hash: [UInt8]
    /// Sums of our own bytes at that range, for a delta (nil: whole).
    let sums: [UInt8]?
    let callback: @Sendable (BlockReply?) -> Void
}

/// A block request's answer.
enum BlockReply: Sendable {
    /// The block's bytes.
    case whole([UInt8])
    /// A delta against the sums sent (`BlockDelta.apply`).
    case delta([UInt8])
}

extension FolderService: FolderHost {}

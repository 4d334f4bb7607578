#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// A small file's whole content that came with a peer's index page (`indexBlocks`), verified:
/// its hash is the single chunk of an entry of that page.
struct IndexBlock: Sendable {
    /// Who sent it (its bytes count as received from that peer).
    let device: String
    let bytes: [UInt8]
}

extension SharedFolder {
    /// Files of at most this size travel with the index to a peer that takes them, when they
    /// are one chunk (every file this small is).
    static let indexBlockLimit = WireLimits.maxIndexBlock
    /// The most content one index page carries, in `indexBlocks` frames of at most
    /// `indexBlockFrameBytes` (a frame is read whole into memory before it is decoded; in B,
    /// 4 MiB frames gave the same peaks as 1 MiB ones, 77–96 against 80–84 MiB on bob).
    static let indexBlockPageBytes = 4 << 20
    static let indexBlockFrameBytes = 1 << 20
    /// The most content that index pages waiting for a pull, and the pulls using it, hold on
    /// one node (`IndexBlockBudget`, every folder): a page that arrives beyond it keeps its
    /// entries but not its blocks, which are then asked for as before. B (b-ab, tmpfs,
    /// 4 pairs each): 0.88 s with 32 MiB, 0.96 s with 20, 1.02 s with 16, 1.19 s without
    /// content; bob's peak RSS ~80 MiB with any of them, 57–63 MiB without content.
    static let indexBlockHeldBytes = 32 << 20

    /// What a block costs to hold: its bytes and an array's overhead, so that many tiny
    /// blocks count for what they take.
    static func heldCost(_ count: Int) -> Int { count + 64 }

    /// What `blocks` cost to hold (`heldCost` of each).
    static func heldCost(of blocks: [[UInt8]]) -> Int { blocks.reduce(0) { $0 + heldCost($1.count) } }

    // MARK: Sending (the folder's serve queue)

    /// Whether `record`'s content may go with the index page that lists it, as far as the
    /// index tells (`indexBlocks(for:localDevice:)` then checks the disk): a live small file
    /// of one chunk that changed here.
    static func mayCarry(_ record: FileRecord, localDevice: String) -> Bool {
        // (`entry`'s fields directly: the record's key-path lookup is a generic call per read.)
        let entry = record.entry
        return entry.kind == .file && !entry.deleted && entry.modifiedBy == localDevice && record.chunks.count == 1
            && entry.size > 0 && entry.size <= Int64(indexBlockLimit)
    }

    /// Whether any of `records` (an index page about to be sent) may have its content sent
    /// with it (`indexBlocks(for:localDevice:)` reads the disk only then).
    static func mayCarryBlocks(_ records: some Sequence<FileRecord>, localDevice: String) -> Bool {
        records.contains { mayCarry($0, localDevice: localDevice) }
    }

    /// The content of the small files among `records` (an index page about to be sent), for
    /// a peer that takes it with the page, at most `indexBlockPageBytes`, each content once.
    ///
    /// Only files changed here (`modifiedBy` is this device: a peer cannot have that version
    /// yet, while the files it sent us, echoed back, it has) and only while the file's size,
    /// mtime and inode are still those the index recorded when it hashed the file, and its
    /// bytes still hash to what it recorded (a size and mtime are no proof of content; the
    /// hash cost alice 0.04 CPU-s in B, b-ab 5 pairs: 0.87 vs 0.84 s). A file ignored since it
    /// was indexed is left out, as its block requests are refused. What is left out is asked
    /// for by the peer as before. Reads the disk: never on the node's queue.
    func indexBlocks(for records: [FileRecord], localDevice: String) -> [[UInt8]] {
        var blocks: [[UInt8]] = []
        var hashes = Set<ChunkHash>()
        var total = 0
        var rootHandle: DirectoryHandle?
        // Each directory opened once for the page (a page lists a folder's files together):
        // resolving every file from the root cost alice 1.5 % of her CPU in D.
        var parents = ParentHandles()
        let ignores = servedIgnores.withLock { $0 }
        for record in records where Self.mayCarry(record, localDevice: localDevice) {
            let entry = record.entry
            guard let chunk = record.chunks.first, chunk.offset == 0, chunk.size == entry.size, let inode = record.inode,
                  total + Int(chunk.size) <= Self.indexBlockPageBytes,
                  let hash = ChunkHash(bytes: chunk.hash), !hashes.contains(hash), let safe = try? SafePath(entry.path),
                  let ignores, !ignores.isIgnored(safe.string, isDirectory: false) else { continue }
            if rootHandle == nil { rootHandle = try? DirectoryHandle(path: root) }
            guard let rootHandle, let resolved = try? parents.resolve(safe, under: rootHandle), resolved.existing == .file,
                  let reader = try? ChunkReader(name: resolved.name, in: resolved.directory),
                  let stamp = reader.stamp(), stamp.size == entry.size, stamp.mtimeNs == entry.mtimeNs, stamp.inode == inode
            else { continue }
            // Hashed: what goes with the page is what the index recorded (a damaged file is left
            // out, and its damage handled as a block request's would be).
            let bytes: [UInt8]
            do { bytes = try reader.bytes(of: ChunkRef(offset: 0, size: UInt32(chunk.size), hash: hash), verify: true) } catch {
                if error.kind == .changedOnDisk {
                    servedMismatch(path: safe.string, offset: 0, indexed: NodeIndex.FileStamp(size: entry.size, mtimeNs: entry.mtimeNs, inode: inode),
                                   file: reader.file.fd)
                }
                continue
            }
            hashes.insert(hash)
            blocks.append(bytes)
            total += bytes.count
        }
        return blocks
    }

    /// `blocks` as `indexBlocks` frames of at most `indexBlockFrameBytes` of content each.
    static func indexBlockFrames(_ blocks: [[UInt8]], folder: String) -> [Frame] {
        var frames: [Frame] = []
        var (start, size) = (0, 0)
        for (n, block) in blocks.enumerated() {
            if size + block.count > indexBlockFrameBytes && n > start {
                frames.append(.indexBlocks(folder: folder, blocks: Array(blocks[start..<n])))
                (start, size) = (n, 0)
            }
            size += block.count
        }
        if start < blocks.count { frames.append(.indexBlocks(folder: folder, blocks: Array(blocks[start...]))) }
        return frames
    }

    // MARK: Receiving (the node's queue)

    /// The blocks of a peer's `indexBlocks` frame that are the whole content of an entry of the
    /// index page that followed it, by hash: `wanted` has the hash and size of the single
    /// chunk of each small file of that page (from its validated manifest). A block of
    /// another size than any of them is not even hashed; any other block is dropped.
    /// (Runs on the node's queue: B hashes 1,000 blocks of 4 KiB a page, ~2 ms.)
    static func matchIndexBlocks(_ blocks: [[UInt8]], wanted: [ChunkHash: Int], device: String) -> [ChunkHash: IndexBlock] {
        let sizes = Set(wanted.values)
        var found: [ChunkHash: IndexBlock] = [:]
        for block in blocks where sizes.contains(block.count) {
            let hash = ChunkHash.of(block)
            if wanted[hash] == block.count { found[hash] = IndexBlock(device: device, bytes: block) }
        }
        return found
    }
}

/// What the content held for pulls may take on one node (`SharedFolder.indexBlockHeldBytes`):
/// pages take their blocks' cost when they arrive and give it back once their pull is done
/// or they are dropped.
final class IndexBlockBudget: Sendable {
    let limit: Int
    private let held = Mutex(0)

    init(limit: Int = SharedFolder.indexBlockHeldBytes) {
        self.limit = limit
    }

    /// Takes `cost`; false (nothing taken) when it does not fit.
    func hold(_ cost: Int) -> Bool {
        held.withLock { held in
            guard held + cost <= limit else { return false }
            held += cost
            return true
        }
    }

    /// Gives back what `hold` took.
    func release(_ cost: Int) {
        held.withLock { $0 -= cost }
    }

    /// What is held now.
    var current: Int { held.withLock { $0 } }
}

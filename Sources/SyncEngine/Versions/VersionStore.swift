#if canImport(Glibc)
internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex

/// The content-addressed chunk store behind kept versions: one file per chunk, named by its
/// BLAKE3 hash, under HOME/versions/.chunks/HH/REST (HH: the first two hex digits; hidden, as no
/// folder's tree of older releases, `KeptFolderImport`, starts with a dot).
/// A chunk kept by many versions (or many files) is stored once: 100 versions of a large file
/// that changed a little each time cost the changed chunks, not 100 copies. Chunk boundaries
/// are the index's (the content-defined chunker's), so an edit changes few of them.
///
/// Every chunk is verified when it is written (its bytes must hash to its name) and when it
/// is read (a damaged or missing file reads as nil and is removed). Files and directories are
/// the user's only (0600, 0700). The metadata (which version holds which chunks) is in the
/// node index (`NodeIndex.addVersion`). A chunk may also be in a pack (`VersionPacks`: a
/// replaced file adopted whole, not copied): `has` and `read` look there too.
struct VersionStore: Sendable {
    /// HOME/versions/.chunks.
    let root: String
    /// The packs (none without an index: a store of chunk files only).
    let packs: VersionPacks?

    init(versionsDirectory: String, index: NodeIndex? = nil) {
        root = versionsDirectory + "/.chunks"
        packs = index.map { VersionPacks(versionsDirectory: versionsDirectory, index: $0) }
    }

    func path(of hash: ChunkHash) -> String {
        let hex = hash.description
        return root + "/" + hex.prefix(2) + "/" + hex.dropFirst(2)
    }

    /// Whether the chunk's file is there, or a pack holds it (not read: `read` verifies).
    func has(_ hash: ChunkHash) -> Bool {
        hasFile(hash) || packs?.holding([hash]).isEmpty == false
    }

    func hasFile(_ hash: ChunkHash) -> Bool {
        access(path(of: hash), F_OK) == 0
    }

    /// Those of `hashes` the store has neither as a file nor in a pack (one read of the
    /// index for the whole list).
    func lacking(_ hashes: [ChunkHash]) -> Set<ChunkHash> {
        let noFile = hashes.filter { !hasFile($0) }
        guard let packs, !noFile.isEmpty else { return Set(noFile) }
        return Set(noFile).subtracting(packs.holding(noFile))
    }

    /// Stores `bytes` as the chunk `hash`; false when they do not hash to it or cannot be written.
    /// Not flushed here (a version of a 1 GiB file is ~2,000 chunks): `flush` makes a batch
    /// durable; a chunk torn by a crash before it fails its hash when read (not held).
    @discardableResult
    func put(_ bytes: UnsafeRawBufferPointer, hash: ChunkHash, verified: Bool = false) -> Bool {
        guard verified || ChunkHash.of(bytes) == hash else { return false }
        if has(hash) { return true }
        let target = path(of: hash)
        let directory = PathName.deletingLastComponent(target)
        if access(directory, F_OK) != 0 {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let temp = target + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        var written = 0
        while written < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n <= 0 { break }
            written += n
        }
        let ok = written == bytes.count
        close(fd)
        guard ok, rename(temp, target) == 0 else {
            unlink(temp)
            return false
        }
        return true
    }

    @discardableResult
    func put(_ bytes: [UInt8], hash: ChunkHash, verified: Bool = false) -> Bool {
        bytes.withUnsafeBytes { put($0, hash: hash, verified: verified) }
    }

    /// The chunk's bytes, verified against its hash and size, from its file or else from a
    /// pack; nil when missing, of another size, or damaged (a file of the right size whose
    /// bytes do not hash to its name is removed, a pack's location forgotten: they can only
    /// mislead).
    func read(_ hash: ChunkHash, size: Int) -> [UInt8]? {
        guard size > 0, size <= Manifest.maxChunkSize else { return nil }
        if let bytes = readFile(hash, size: size) { return bytes }
        guard let packs else { return nil }
        let (bytes, forgot) = packs.read(hash, size: size)
        // Held nowhere here any more: the versions needing it are no longer held (best
        // effort: not written, the next read finds it missing again).
        if forgot, bytes == nil, !has(hash) { try? packs.index.setVersionsNotHeld(holding: hash.bytes) }
        return bytes
    }

    private func readFile(_ hash: ChunkHash, size: Int) -> [UInt8]? {
        let file = path(of: hash)
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: size + 1)
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, $0.count - got, off_t(got)) }
            if n <= 0 { break }
            got += n
        }
        // Another size than asked: not this chunk as the caller knows it (left as it is).
        guard got == size else { return nil }
        bytes.removeLast()
        guard ChunkHash.of(bytes) == hash else {
            unlink(file)
            return nil
        }
        return bytes
    }

    /// Makes the chunks `written` durable: an `fsync` of each for a few (`syncfs` would wait
    /// for whatever else was written to the file system: a store test took 26 s instead of 13
    /// beside other builds), one `syncfs` for many (a new version of a large file).
    func flush(_ written: [ChunkHash]) {
        if written.count <= Self.fsyncEach {
            for hash in written {
                let fd = open(path(of: hash), O_RDONLY | O_CLOEXEC)
                if fd >= 0 { fsync(fd); close(fd) }
            }
            return
        }
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = syncFileSystem(fd)
        close(fd)
    }

    static let fsyncEach = 32

    /// Removes chunks no version uses any more. Returns those whose file stays, with why
    /// (one already gone is removed).
    @discardableResult
    func remove(_ hashes: [[UInt8]]) -> [(hash: [UInt8], reason: String)] {
        var failed: [(hash: [UInt8], reason: String)] = []
        for bytes in hashes {
            guard let hash = ChunkHash(bytes: bytes), unlink(path(of: hash)) != 0, errno != ENOENT else { continue }
            failed.append((bytes, path(of: hash) + ": " + String(cString: strerror(errno))))
        }
        return failed
    }

    /// Bytes the store's chunk files and packs take (their sizes; a walk of the store).
    func storedBytes() -> Int64 {
        chunkFileBytes() + (packs?.files().reduce(0) { $0 + $1.size } ?? 0)
    }

    /// Bytes the chunk files take.
    func chunkFileBytes() -> Int64 {
        func walk(_ directory: String) -> Int64 {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
            var total: Int64 = 0
            for name in names {
                var info = stat()
                guard lstat(directory + "/" + name, &info) == 0 else { continue }
                if info.st_mode & S_IFMT == S_IFREG { total += Int64(info.st_size) }
                if info.st_mode & S_IFMT == S_IFDIR { total += walk(directory + "/" + name) }
            }
            return total
        }
        return walk(root)
    }
}

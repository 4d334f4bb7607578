#if canImport(Glibc)
internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex

/// Versions kept without copying them: a large file that a peer's edit or deletion, or a
/// restore, took out of the folder is moved, inode and all, into HOME/versions/.packs/NAME
/// (a *pack*: no name in the folder reaches it), and the store
/// reads its chunks there at the offsets the index records (`version_pack_chunks`). A 1 MiB
/// edit of a 1 GiB file then costs a rename, not 1 GiB of chunk files.
///
/// Only an inode no one else can change is adopted: a regular file with no other link, on the
/// file system of the home (`adopt` checks `st_nlink` and `st_dev`, before and after the
/// rename). An inode is adopted only once it is out of the folder for good (after the last
/// point where the applier may swap it back: a directory moved during the pull): a pack
/// linked into the folder again would be the user's live file, and an edit of it the loss of
/// the version. Its mode is left as it is (the home is the user's only, 0700). Every chunk
/// read from a pack is hashed; a location whose bytes
/// no longer match (disk damage, a writer that still had the old file open) is forgotten and
/// reads as not held. A pack goes when no kept version uses any chunk in it (whole-pack
/// deletion: one chunk still used keeps the whole pack). A pack file the index does not name
/// (a crash between the rename and the index) is removed at start (`VersionKeeper.tidyPacks`).
///
/// Partial expiry (not built): freeing the chunks of a pack that no version uses while
/// others still do would need hole punching (`fallocate` PUNCH_HOLE | KEEP_SIZE; ext4, xfs,
/// btrfs; elsewhere whole packs only) over each unused chunk's range, whole blocks only
/// (content-defined chunks are not block-aligned: a block shared with a used neighbour
/// stays); the chunk's location row removed under the gate before the punch (a crash between
/// leaves bytes no row names, never a row naming zeros — and a read hashes anyway); and the
/// cap counting a pack's allocated blocks (`st_blocks`), not its size.
struct VersionPacks: Sendable {
    /// HOME/versions/.packs.
    let root: String
    let index: NodeIndex
    /// This run's mark, the start of every pack name it adopts: at start, an unnamed pack file
    /// of another run is a crash's orphan, and one of this run may be between rename and index.
    let run: String

    /// Smaller files are copied chunk by chunk as before (a pack per small file would only
    /// add rows and files for no gain).
    static let minimumSize: Int64 = 1 << 20

    init(versionsDirectory: String, index: NodeIndex) {
        root = versionsDirectory + "/.packs"
        self.index = index
        run = NameTag.hex(of: (0..<8).map { _ in UInt8.random(in: 0...255) }, digits: 8)
    }

    func path(_ name: String) -> String { root + "/" + name }

    /// Those of `hashes` some pack holds (one read of the index).
    func holding(_ hashes: [ChunkHash]) -> Set<ChunkHash> {
        guard !hashes.isEmpty, let held = try? index.packedHashes(hashes.map(\.bytes)) else { return [] }
        return Set(held.compactMap { ChunkHash(bytes: $0) })
    }

    /// The chunk's bytes from a pack that holds it, verified against its hash; nil when none
    /// does or none verifies. A location whose bytes do not verify (or whose file is gone) is
    /// forgotten: it can only mislead (`forgot` says so).
    func read(_ hash: ChunkHash, size: Int) -> (bytes: [UInt8]?, forgot: Bool) {
        guard let locations = try? index.packLocations(of: hash.bytes) else { return (nil, false) }
        var forgot = false
        for location in locations where location.size == Int64(size) {
            let fd = open(path(location.name), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else {
                // (Best effort: not forgotten now, the next read tries again.)
                if errno == ENOENT { try? index.removePackLocation(name: location.name, hash: hash.bytes); forgot = true }
                continue
            }
            var bytes = [UInt8](repeating: 0, count: size)
            var got = 0
            while got < size {
                let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, size - got, off_t(location.offset) + off_t(got)) }
                if n <= 0 { break }
                got += n
            }
            close(fd)
            if got == size, ChunkHash.of(bytes) == hash { return (bytes, forgot) }
            try? index.removePackLocation(name: location.name, hash: hash.bytes)
            forgot = true
        }
        return (nil, forgot)
    }

    /// Moves the file `name` in `directory` (`size` bytes, out of the folder for good at a
    /// hidden name) into the packs as a new pack, durably; its name. Moved, not linked: no
    /// name in the folder ever reaches a pack, not even the hidden one until the caller would
    /// have removed it (a later pull of the path opens that name, truncates it and writes it).
    /// Nil when it is not adopted (not a regular file of that size, another link to it,
    /// another file system, a rename that fails): it is where it was, and the caller copies
    /// what the store lacks instead.
    func adopt(_ name: String, in directory: DirectoryHandle, size: Int64) -> String? {
        var before = stat()
        guard fstatat(directory.fd, name, &before, AT_SYMLINK_NOFOLLOW) == 0, before.st_mode & S_IFMT == S_IFREG,
              before.st_nlink == 1, Int64(before.st_size) == size else { return nil }
        // Its name durable too: a pack the index names must not vanish with its directory.
        if access(root, F_OK) != 0 { try? DurableNames.createDirectories(root, mode: 0o700) }
        var home = stat()
        guard stat(root, &home) == 0, home.st_dev == before.st_dev else { return nil }
        let pack = run + "-" + NameTag.hex(of: (0..<16).map { _ in UInt8.random(in: 0...255) }, digits: 32)
        guard renameat(directory.fd, name, AT_FDCWD, path(pack)) == 0 else { return nil }
        // Still that inode, and linked by the pack alone (a link made between the check and
        // the rename would let someone else write the version).
        let fd = open(path(pack), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        var after = stat()
        let same = fd >= 0 && fstat(fd, &after) == 0 && after.st_ino == before.st_ino && after.st_dev == before.st_dev
            && after.st_nlink == 1 && Int64(after.st_size) == size
        // Durable before the index says it is held (the bytes are the user's old file's: a
        // file already on disk costs the flush little).
        guard same, fsync(fd) == 0 else {
            if fd >= 0 { close(fd) }
            // Back for the caller to copy from (should even that fail, the file is a pack no
            // row names: removed at the next start).
            renameat(AT_FDCWD, path(pack), directory.fd, name)
            return nil
        }
        close(fd)
        let directoryFD = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 { fsync(directoryFD); close(directoryFD) }
        return pack
    }

    /// Removes pack files; those whose file stays, with why (one already gone is removed).
    @discardableResult
    func remove(_ names: [String]) -> [(name: String, reason: String)] {
        names.compactMap { name in
            unlink(path(name)) == 0 || errno == ENOENT ? nil : (name, path(name) + ": " + String(cString: strerror(errno)))
        }
    }

    /// The pack files there are (regular files only: a pack is never anything else).
    func files() -> [(name: String, size: Int64)] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return names.compactMap { name in
            var info = stat()
            guard lstat(path(name), &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
            return (name, Int64(info.st_size))
        }
    }
}

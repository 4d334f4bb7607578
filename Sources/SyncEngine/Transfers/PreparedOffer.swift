#if canImport(Glibc)
internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// An offer ready to send: the files on disk, their manifests, and the numbering of all
/// their chunks in one sequence (entry by entry), which is how the wire counts them.
struct PreparedOffer: Sendable {
    struct Source: Sendable {
        let path: String
        /// Nil while the manifest streams (the file is being hashed).
        let manifest: Manifest?
        /// Size, mtime and inode when it was chunked: a file that differs has changed.
        let stamp: FileStamp

        /// Throws `.changedOnDisk` when the file is no longer the one that was chunked.
        func checkUnchanged() throws(FileError) {
            guard FileStamp(path: path) == stamp else {
                throw FileError(kind: .changedOnDisk, operation: "send", path: path, message: "the file changed since it was offered")
            }
        }
    }

    /// What identifies a file's content cheaply.
    struct FileStamp: Sendable, Equatable {
        let size: Int64
        let mtimeNs: Int64
        let inode: UInt64

        init?(path: String) {
            var st = stat()
            guard stat(path, &st) == 0 else { return nil }
            size = Int64(st.st_size)
            mtimeNs = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            inode = UInt64(st.st_ino)
        }
    }

    let offer: TransferOffer
    let sources: [Source]
    /// Names the content: the same files (paths, sizes, modes, chunks) give the same hash,
    /// so a receiver can find a partial transfer to resume.
    let rootHash: [UInt8]
    let totalSize: Int64

    /// The same offer under another transfer ID (to continue a recorded transfer).
    func withID(_ id: TransferID) -> PreparedOffer {
        var offer = self.offer
        offer.id = id
        return PreparedOffer(offer: offer, sources: sources, rootHash: rootHash, totalSize: totalSize)
    }

    /// The numbering of all chunks of the offer (those known: a streamed manifest's become
    /// known as the file is hashed).
    var layout: ChunkLayout {
        let known = sources.prefix { $0.manifest != nil }.map { $0.manifest! }
        return ChunkLayout(manifests: known, streamedSizes: sources.dropFirst(known.count).map { UInt64($0.stamp.size) })
    }

    /// Whether the offer leaves a manifest out (it streams).
    var isStreamed: Bool { sources.contains { $0.manifest == nil } }

    /// The offer of one regular file whose manifest streams: offered at once, without it, and
    /// hashed while it is sent. Nil when the file is not one to stream: smaller than
    /// `minimumSize`, or with a manifest a shared folder's index holds for it (`indexed`).
    /// Reads no content: call it off the node's queue all the same (it stats the file).
    static func streaming(path: String, name: String?, minimumSize: Int64, id: TransferID = .random(),
                          indexed: ((String, FileStamp) -> Manifest?)? = nil) throws(EngineError) -> PreparedOffer? {
        var st = stat()
        // (Not a symbolic link: `build` refuses one, and so would any later offer.)
        guard lstat(path, &st) == 0 else { throw .io(path: path, reason: String(cString: strerror(errno))) }
        guard (st.st_mode & S_IFMT) == S_IFREG, let stamp = FileStamp(path: path), stamp.size >= max(1, minimumSize),
              ChunkLayout.mayStream(size: UInt64(stamp.size)), indexed?(path, stamp) == nil else { return nil }
        let baseName = name ?? URL(fileURLWithPath: path).lastPathComponent
        do { _ = try SafePath.validateName(baseName) } catch {
            throw .invalidArgument("the name '\(baseName)' cannot be sent: \(error.description)")
        }
        let entry = TransferOffer.Entry(path: baseName, size: UInt64(stamp.size), mode: UInt32(st.st_mode) & 0o7777,
                                        mtimeNanoseconds: stamp.mtimeNs, manifest: [])
        let offer = TransferOffer(id: id, kind: .file, name: baseName, entries: [entry])
        return PreparedOffer(offer: offer, sources: [Source(path: path, manifest: nil, stamp: stamp)],
                             rootHash: TransferRecord.unknownRootHash, totalSize: stamp.size)
    }

    /// This offer with the manifests a streamed one left out, once the files are hashed
    /// (`layout` complete): what any later offer of the transfer sends.
    func completed(with layout: ChunkLayout) -> PreparedOffer {
        precondition(layout.isComplete && layout.manifests.count == sources.count, "PreparedOffer.completed: the layout is not complete")
        var offer = self.offer
        for (index, manifest) in layout.manifests.enumerated() where offer.entries[index].manifest.isEmpty {
            offer.entries[index].manifest = manifest.encode()
        }
        let sources = sources.enumerated().map { index, source in
            Source(path: source.path, manifest: layout.manifests[index], stamp: source.stamp)
        }
        return PreparedOffer(offer: offer, sources: sources, rootHash: Self.contentHash(of: offer, manifests: layout.manifests),
                             totalSize: totalSize)
    }

    /// Chunks a file (or every regular file of a folder) and builds the offer. Blocking:
    /// call it off the node's queue.
    /// `progress` gets (bytes read so far, bytes in all), after every chunk.
    /// `indexed`, when given, returns the manifest a shared folder's index holds for a file
    /// whose size, mtime and inode are still those it hashed (nil otherwise): such a file is
    /// not read and hashed again. `Node.indexedManifest` is the one the node passes.
    static func build(path: String, name: String?, kind: TransferOffer.Kind, id: TransferID = .random(),
                      indexed: ((String, FileStamp) -> Manifest?)? = nil,
                      progress: ((Int64, Int64) -> Void)? = nil) throws(EngineError) -> PreparedOffer {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw .io(path: path, reason: String(cString: strerror(errno)))
        }
        let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
        let isFile = (info.st_mode & S_IFMT) == S_IFREG
        guard isDirectory || isFile else {
            throw .invalidArgument("\(path) is not a regular file or a folder")
        }
        let baseName = name ?? URL(fileURLWithPath: path).lastPathComponent
        do { _ = try SafePath.validateName(baseName) } catch {
            throw .invalidArgument("the name '\(baseName)' cannot be sent: \(error.description)")
        }
        var files: [(relative: String, absolute: String)] = []
        if isDirectory {
            files = try walk(path)
        } else {
            files = [(baseName, path)]
        }
        var sources: [Source] = []
        var entries: [TransferOffer.Entry] = []
        let total = files.reduce(Int64(0)) { sum, file in
            var st = stat()
            return sum + (stat(file.absolute, &st) == 0 ? Int64(st.st_size) : 0)
        }
        var before: Int64 = 0
        progress?(0, total)
        for file in files {
            var st = stat()
            guard stat(file.absolute, &st) == 0, let stamp = FileStamp(path: file.absolute) else {
                throw .io(path: file.absolute, reason: String(cString: strerror(errno)))
            }
            let manifest: Manifest
            let done = before
            if let reused = indexed?(file.absolute, stamp), reused.fileSize == UInt64(stamp.size) {
                manifest = reused
                progress?(done + stamp.size, total)
            } else {
                do {
                    manifest = try FileChunker.manifest(ofFileAt: file.absolute, progress: progress.map { report in
                        { bytes in report(done + Int64(bytes), total) }
                    })
                } catch {
                    throw .file(error)
                }
            }
            let encoded = manifest.encode()
            guard encoded.count <= WireLimits.maxManifest else {
                throw .invalidArgument("\(file.absolute) is too large to send (\(manifest.chunks.count) chunks)")
            }
            let mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            // A stream has no mode of its own (its spool file is private): offer a plain 0644.
            let mode = kind == .stream ? 0o644 : UInt32(st.st_mode) & 0o7777
            entries.append(.init(path: file.relative, size: manifest.fileSize, mode: mode,
                                 mtimeNanoseconds: mtime, manifest: encoded))
            guard FileStamp(path: file.absolute) == stamp else {
                throw .io(path: file.absolute, reason: "it changed while it was being read; send it again")
            }
            sources.append(Source(path: file.absolute, manifest: manifest, stamp: stamp))
            before += Int64(manifest.fileSize)
        }
        let offer = TransferOffer(id: id, kind: isDirectory ? .folder : kind, name: baseName, entries: entries)
        do { try Frame.offer(offer).validate() } catch {
            throw .invalidArgument("cannot offer \(path): \(error.description)")
        }
        return PreparedOffer(offer: offer, sources: sources, rootHash: contentHash(of: offer, manifests: sources.map { $0.manifest! }),
                             totalSize: Int64(offer.totalSize))
    }

    /// The content hash of an offer: kind, name, and every entry's path, size, mode and
    /// manifest root (not the mtime: touching a file does not make it new content).
    static func contentHash(of offer: TransferOffer, manifests: [Manifest]) -> [UInt8] {
        var hasher = BLAKE3.Hasher()
        hasher.update(Array("syncpeer-offer-v3".utf8))
        hasher.update([offer.kind.rawValue])
        let name = Array(offer.name.utf8)
        hasher.update([UInt8(name.count >> 8), UInt8(name.count & 0xFF)] + name)
        for (entry, manifest) in zip(offer.entries, manifests) {
            let path = Array(entry.path.utf8)
            var fields: [UInt8] = [UInt8(path.count >> 8), UInt8(path.count & 0xFF)] + path
            fields += withUnsafeBytes(of: entry.size.bigEndian) { Array($0) }
            fields += withUnsafeBytes(of: entry.mode.bigEndian) { Array($0) }
            fields += manifest.rootHash
            hasher.update(fields)
        }
        return hasher.finalize()
    }

    /// Regular files below `root`, sorted, as (relative path, absolute path). Symbolic links
    /// are not followed (and not sent); other special files are skipped.
    static func walk(_ root: String) throws(EngineError) -> [(relative: String, absolute: String)] {
        var out: [(String, String)] = []
        var stack = [""]
        while let relative = stack.popLast() {
            let directory = relative.isEmpty ? root : root + "/" + relative
            let names: [String]
            do { names = try FileManager.default.contentsOfDirectory(atPath: directory) } catch {
                throw .io(path: directory, reason: "cannot list it")
            }
            for name in names.sorted() {
                let childRelative = relative.isEmpty ? name : relative + "/" + name
                let absolute = root + "/" + childRelative
                var st = stat()
                guard lstat(absolute, &st) == 0 else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: stack.append(childRelative)
                case S_IFREG: out.append((childRelative, absolute))
                default: continue
                }
            }
        }
        return out.sorted { $0.0 < $1.0 }
    }
}

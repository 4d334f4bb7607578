internal import PeerModel
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// Keeps the versions a node replaces or sees replaced (issue 41): their chunks in the
/// `VersionStore`, their metadata in the index. Used by the applier (a peer's edit, deletion
/// or rename over a local file), the scanner (a recorded file overwritten or deleted here),
/// conflict resolution and `verify`. A folder whose policy is `none` keeps nothing.
struct VersionKeeper: Sendable {
    let store: VersionStore
    let index: NodeIndex
    let clock: @Sendable () -> Int64
    /// Says what the index could not record or read (an error event): a version that was
    /// not recorded, an expiry that did not run.
    let report: @Sendable (String) -> Void
    /// Chunk files and packs whose removal failed: tried again at the next expiry (shared by copies).
    let unremoved = Unremoved()

    final class Unremoved: Sendable {
        let hashes = Mutex<Set<[UInt8]>>([])
        let packs = Mutex<Set<String>>([])
    }

    /// Held (by every copy) from "does the store have this chunk?" to the version's row, and
    /// by expiry from a version's removal to its files': a version is never recorded as held
    /// by a chunk file or pack that expiry is removing.
    let gate = Gate()

    final class Gate: Sendable {
        let lock = Mutex<Void>(())
    }

    init(versionsDirectory: String, index: NodeIndex, clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
         report: @escaping @Sendable (String) -> Void = { _ in }) {
        store = VersionStore(versionsDirectory: versionsDirectory, index: index)
        self.index = index
        self.clock = clock
        self.report = report
    }

    /// The settings key of a folder's policy.
    static func policySetting(_ folderID: String) -> String { "folder_versions." + folderID }

    /// The folder's policy (`VersionPolicy.standard` unless set). (An index that cannot say:
    /// the standard policy, which keeps versions; nothing is lost by keeping one more.)
    func policy(folderID: String) -> VersionPolicy {
        ((try? index.setting(Self.policySetting(folderID))) ?? nil).flatMap(VersionPolicy.init(parsing:)) ?? .standard
    }

    func setPolicy(_ policy: VersionPolicy, folderID: String) throws(IndexError) {
        try index.setSetting(Self.policySetting(folderID), policy.description)
    }

    /// Keeps the file `record` describes, reading its chunks from `reader` (the file that is
    /// about to go, or has just been replaced and waits at a temporary name). Chunks already
    /// in the store are not read; each one read must hash as the record says (a file edited
    /// since the scan is kept as far as it still matches, and recorded as not held).
    /// Returns the version's ID, nil when nothing is kept (policy `none`, not a file).
    /// With `whole`, a version not held whole is not recorded either (nil): the caller is
    /// about to remove the only copy of it and must not.
    @discardableResult
    func keep(_ record: FileRecord, from reader: ChunkReader?, reason: String, whole: Bool = false) -> Int64? {
        guard record.kind == .file, !record.deleted, let root = record.rootHash, policy(folderID: record.folderID).kind != .none
        else { return nil }
        return gate.lock.withLock { _ in copy(record, rootHash: root, from: reader, reason: reason, whole: whole) }
    }

    /// `keep`'s work, under the gate.
    private func copy(_ record: FileRecord, rootHash root: [UInt8], from reader: ChunkReader?, reason: String, whole: Bool) -> Int64? {
        var held = true
        var written: [ChunkHash] = []
        let lacking = store.lacking(record.chunks.compactMap { ChunkHash(bytes: $0.hash) })
        for chunk in record.chunks {
            guard let hash = ChunkHash(bytes: chunk.hash) else { held = false; continue }
            if !lacking.contains(hash) { continue }
            // (Hashed once, by the reader: `put` need not hash it again.)
            guard let reader, let size = UInt32(exactly: chunk.size),
                  let bytes = try? reader.bytes(of: ChunkRef(offset: UInt64(chunk.offset), size: size, hash: hash), verify: true),
                  store.put(bytes, hash: hash, verified: true) else {
                held = false
                continue
            }
            written.append(hash)
        }
        // Durable before the index says it is held.
        if !written.isEmpty { store.flush(written) }
        if whole, !held { return nil }
        return add(record, rootHash: root, held: held, reason: reason)
    }

    /// Keeps the file at `absolute` as it is now (chunked and hashed afresh: its bytes may
    /// not be what the index records, as for a file `verify` found damaged), under the path
    /// and version `record` gives (conflict resolution, `verify`, `revert`, a file a power
    /// cut rolled back, the import of the old kept folder). `whole` as for `keep`.
    @discardableResult
    func keepFile(at absolute: String, as record: FileRecord, reason: String, whole: Bool = false) -> Int64? {
        guard policy(folderID: record.folderID).kind != .none,
              let manifest = try? FileChunker.manifest(ofFileAt: absolute), let reader = try? ChunkReader(path: absolute) else { return nil }
        var current = record
        (current.kind, current.deleted, current.size) = (.file, false, Int64(manifest.fileSize))
        current.rootHash = manifest.rootHash
        current.chunks = manifest.chunks.map { FileChunkRecord(offset: Int64($0.offset), size: Int64($0.size), hash: $0.hash.bytes) }
        return keep(current, from: reader, reason: reason, whole: whole)
    }

    /// Whether the folder keeps versions at all (its policy is not `none`).
    func keeps(folderID: String) -> Bool { policy(folderID: folderID).kind != .none }

    /// Records a version whose file is already gone or overwritten (the scanner found it so):
    /// held only if the store has every chunk of it, else known-but-not-held, so that history
    /// still lists it and a peer that holds it can serve it.
    /// Many at once, in one write of the index; one that fails is reported.
    func noteLost(_ records: [FileRecord], reason: String) {
        gate.lock.withLock { _ in noteLostLocked(records, reason: reason) }
    }

    private func noteLostLocked(_ records: [FileRecord], reason: String) {
        var policies: [String: Bool] = [:]
        let versions = records.compactMap { record -> VersionRecord? in
            guard record.kind == .file, !record.deleted, let root = record.rootHash else { return nil }
            let keeps = policies[record.folderID] ?? (policy(folderID: record.folderID).kind != .none)
            policies[record.folderID] = keeps
            guard keeps else { return nil }
            let hashes = record.chunks.compactMap { ChunkHash(bytes: $0.hash) }
            let held = hashes.count == record.chunks.count && store.lacking(hashes).isEmpty
            return versionRecord(record, rootHash: root, held: held, reason: reason)
        }
        guard !versions.isEmpty else { return }
        do throws(IndexError) { _ = try index.addVersions(versions) } catch {
            report("cannot record \(versions.count) version(s) (\(versions[0].path)…) in the index: \(error)")
        }
    }

    /// Records a kept version; nil (and said) when the index cannot.
    private func add(_ record: FileRecord, rootHash: [UInt8], held: Bool, reason: String) -> Int64? {
        do throws(IndexError) { return try index.addVersion(versionRecord(record, rootHash: rootHash, held: held, reason: reason)) } catch {
            report("cannot record the version of \(record.path) in the index: \(error)")
            return nil
        }
    }

    func versionRecord(_ record: FileRecord, rootHash: [UInt8], held: Bool, reason: String) -> VersionRecord {
        VersionRecord(folderID: record.folderID, path: record.path, version: record.version, size: record.size,
                      mtimeNs: record.mtimeNs, mode: record.mode, modifiedBy: record.modifiedBy, keptAt: clock(), reason: reason,
                      rootHash: rootHash, held: held, chunks: record.chunks)
    }

    /// Applies the folder's policy at `now`: removes expired versions, then the oldest ones
    /// while the store is above the cap, and the chunks no version uses any more. Returns how
    /// many versions went. An index that fails stops it (nothing removed then), said.
    @discardableResult
    func expire(folderID: String, now: Int64, fileSystemBytes: Int64) -> Int {
        let policy = policy(folderID: folderID)
        return gate.lock.withLock { _ in
            do throws(IndexError) { return try expire(folderID: folderID, policy: policy, now: now, fileSystemBytes: fileSystemBytes) } catch {
                report("versions of folder \(folderID) not expired: \(error)")
                return 0
            }
        }
    }

    private func expire(folderID: String, policy: VersionPolicy, now: Int64, fileSystemBytes: Int64) throws(IndexError) -> Int {
        try retryRemovals()
        let ages = try index.versionAges(folderID: folderID)
        guard !ages.isEmpty else { return 0 }
        let kept = ages.map { VersionPolicy.Kept(id: $0.id, path: $0.path, keptAt: $0.keptAt) }
        var gone = policy.expired(kept, now: now)
        if let cap = policy.capBytes(fileSystemBytes: fileSystemBytes) {
            // The store's real bytes (chunks shared between versions count once): oldest go first.
            var stored = store.storedBytes()
            var oldest = ages.filter { !gone.contains($0.id) }[...]
            var batch: [Int64] = []
            while stored > cap, let next = oldest.popFirst() {
                batch.append(next.id)
                gone.insert(next.id)
                if batch.count >= 64 || oldest.isEmpty {
                    try removeChunks(try index.removeVersions(batch))
                    batch = []
                    stored = store.storedBytes()
                }
            }
            try removeChunks(try index.removeVersions(batch))
        }
        try removeChunks(try index.removeVersions(Array(gone)))
        return gone.count
    }
}

extension VersionKeeper {
    /// Removes the chunk files of `hashes` (no version uses them) and the packs no version
    /// uses any more; those that stay are said and tried again at the next expiry.
    func removeChunks(_ hashes: [[UInt8]]) throws(IndexError) {
        try removeUnusedPacks()
        let failed = store.remove(hashes)
        guard let first = failed.first else { return }
        unremoved.hashes.withLock { $0.formUnion(failed.map(\.hash)) }
        report("cannot remove \(failed.count) chunk file(s) no version uses any more (\(first.reason)); trying again at the next expiry")
    }

    /// Tries again the removals that failed, of the chunks still unused (a new version may
    /// have taken one up meanwhile: it stays).
    func retryRemovals() throws(IndexError) {
        let pending = unremoved.hashes.withLock { pending in
            defer { pending = [] }
            return Array(pending)
        }
        guard !pending.isEmpty else { return }
        do throws(IndexError) { try removeChunks(try index.unusedVersionChunks(pending)) } catch {
            unremoved.hashes.withLock { $0.formUnion(pending) }
            throw error
        }
    }
}

extension SharedFolder {
    /// A block of a version of `path` this node keeps: only a chunk at exactly that offset,
    /// size and hash of a held version of that path in this folder is read (verified), so a
    /// member gets nothing it could not have got from the file before it was replaced.
    func versionBlock(path: String, offset: Int64, size: UInt32, hash: ChunkHash) -> BlockAnswer {
        guard let index, let versions = host?.versions else { return .notShared }
        // (An index that cannot say: refused as not shared; the member asks another holder.)
        guard (try? index.hasVersionChunk(folderID: id, path: path, offset: offset, size: Int64(size), hash: hash.bytes)) == true
        else { return .notShared }
        guard let bytes = versions.store.read(hash, size: Int(size)) else {
            // (Best effort: not written, the next request finds the chunk missing again.)
            try? index.setVersionsNotHeld(holding: hash.bytes)
            return .unavailable
        }
        return .data(bytes)
    }
}

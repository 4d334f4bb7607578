internal import PeerModel
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// Versions kept as packs (`VersionPacks`): the replaced file itself instead of a copy.
extension VersionKeeper {
    /// Keeps the version `record` describes, out of the folder for good at the hidden name
    /// `name` in `directory` (swapped out by a peer's edit or a restore, moved aside by a
    /// peer's deletion) and about to be removed: the caller must never put it back into the
    /// folder, since the user's edits there would then change the kept version.
    /// When the store lacks most of its bytes, its inode becomes a pack (moved away: the
    /// caller's removal then finds nothing there): nothing is copied.
    /// Otherwise, or when it cannot be adopted (a small file, another file system, another
    /// link to it), the chunks the store lacks are copied as `keep` does: a later version of
    /// a file already kept costs its changed chunks, deduplicated against the packs too.
    @discardableResult
    func keep(_ record: FileRecord, swappedOut name: String, in directory: DirectoryHandle, reason: String) -> Int64? {
        guard record.kind == .file, !record.deleted, let root = record.rootHash, keeps(folderID: record.folderID) else { return nil }
        if let packs = store.packs, record.size >= VersionPacks.minimumSize,
           case let .done(id) = gate.lock.withLock({ _ in adopt(record, rootHash: root, name, in: directory, packs: packs, reason: reason) }) {
            return id
        }
        return keep(record, from: try? ChunkReader(name: name, in: directory), reason: reason)
    }

    private enum Adoption {
        /// Not adopted: copy instead.
        case declined
        /// Adopted (the version's ID), or not recorded (nil, said).
        case done(Int64?)
    }

    /// `keep(swappedOut:)`'s adoption, under the gate.
    private func adopt(_ record: FileRecord, rootHash root: [UInt8], _ name: String, in directory: DirectoryHandle, packs: VersionPacks,
                       reason: String) -> Adoption {
        guard lacksMost(record), let pack = packs.adopt(name, in: directory, size: record.size) else { return .declined }
        do throws(IndexError) {
            return .done(try index.addPackedVersion(versionRecord(record, rootHash: root, held: true, reason: reason),
                                                    pack: pack, size: record.size, addedAt: clock()))
        } catch {
            packs.remove([pack])
            report("cannot record the version of \(record.path) in the index: \(error)")
            return .done(nil)
        }
    }

    /// Whether the store lacks more than half of the file's bytes (a pack of a file it
    /// mostly has would hold those bytes twice).
    private func lacksMost(_ record: FileRecord) -> Bool {
        let lacking = store.lacking(record.chunks.compactMap { ChunkHash(bytes: $0.hash) })
        let bytes = record.chunks.reduce(Int64(0)) { sum, chunk in
            sum + (ChunkHash(bytes: chunk.hash).map(lacking.contains) == false ? 0 : chunk.size)
        }
        return bytes * 2 > record.size
    }

    /// Removes the packs no kept version uses any chunk of (after versions went); a file
    /// whose removal fails is tried again at the next expiry.
    func removeUnusedPacks() throws(IndexError) {
        guard let packs = store.packs else { return }
        let unused = try index.removeUnreferencedPacks()
        let pending = unremoved.packs.withLock { pending in
            defer { pending = [] }
            return Array(pending)
        }
        let failed = packs.remove(unused + pending)
        guard let first = failed.first else { return }
        unremoved.packs.withLock { $0.formUnion(failed.map(\.name)) }
        report("cannot remove \(failed.count) pack(s) no version uses any more (\(first.reason)); trying again at the next expiry")
    }

    /// At start: removes the pack files the index does not name and that this run did not
    /// adopt (a crash between the rename and the index: never recorded, so nothing is lost),
    /// and forgets the packs whose file is gone, marking not held the versions that needed a
    /// chunk held nowhere else here. Returns how many files went and how many packs were forgotten.
    @discardableResult
    func tidyPacks() -> (removed: Int, forgotten: Int) {
        guard let packs = store.packs else { return (0, 0) }
        return gate.lock.withLock { _ in tidy(packs) }
    }

    private func tidy(_ packs: VersionPacks) -> (removed: Int, forgotten: Int) {
        let named: Set<String>
        do throws(IndexError) { named = try index.packNames() } catch {
            report("packs not tidied: \(error)")
            return (0, 0)
        }
        let files = packs.files().map(\.name)
        let orphans = files.filter { !named.contains($0) && !$0.hasPrefix(packs.run + "-") }
        if let failure = packs.remove(orphans).first { report("cannot remove a pack no version uses: \(failure.reason)") }
        let gone = named.subtracting(files)
        guard !gone.isEmpty else { return (orphans.count, 0) }
        do throws(IndexError) {
            let hashes = try index.removePacks(Array(gone))
            let lost = store.lacking(hashes.compactMap { ChunkHash(bytes: $0) })
            try index.setVersionsNotHeld(holdingAny: lost.map(\.bytes))
        } catch {
            report("cannot forget \(gone.count) pack(s) whose file is gone: \(error)")
        }
        return (orphans.count, gone.count)
    }
}

#if canImport(Glibc)
internal import Glibc
#endif
internal import PeerFiles
internal import PeerIndex
internal import PeerModel
internal import Dispatch

/// Damage found while serving: bytes read for a member that do not hash to what the index
/// recorded, in a file whose stamp is still the one recorded (`DamagedFiles`). The chunk is
/// refused; the file is treated as `syncpeer verify` treats a corrupt one: checked whole,
/// then rebuilt from a peer that has the same version, else reported and listed by `status`.
extension SharedFolder {
    /// A chunk of `path` at `offset`, read to be served, did not hash right. `indexed`: the
    /// stamp the index recorded; `file`: the open file it was read from. If the file's stamp
    /// is another now, it changed since it was scanned (its rescan indexes the new bytes):
    /// nothing more. Otherwise it is damaged: said, checked and repaired once per file (any thread).
    func servedMismatch(path: String, offset: UInt64, indexed: NodeIndex.FileStamp, file fd: Int32) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        let onDisk = NodeIndex.FileStamp(size: Int64(st.st_size), mtimeNs: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec),
                                         inode: UInt64(st.st_ino))
        guard onDisk == indexed, damaged.note(path, stamp: indexed, offset: offset) else { return }
        report("\(path) is damaged: its bytes at offset \(offset) no longer match what was scanned, though its size, mtime "
               + "and inode are unchanged (bit rot, or an edit that restored its mtime); they are not served; "
               + "it is checked and repaired from a peer that has this version")
        io.async { [self] in checkDamaged(path) }
    }

    /// Reads `path` whole against the index and, if it is corrupt, repairs it (`repair`); on `io`.
    private func checkDamaged(_ path: String) {
        dispatchPrecondition(condition: .onQueue(io))
        let record: FileRecord?
        do { record = try index?.file(folderID: id, path: path) } catch {
            damaged.unrepaired(path, reason: "cannot read the index: \(error)")
            return
        }
        guard let record, let handle = try? DirectoryHandle(path: root) else { return damaged.clear(path) }
        switch Self.check(record, under: handle) {
        case .intact:
            damaged.clear(path)
        case .changed:
            damaged.clear(path)
            fullScanPaths([path])
        case .corrupt:
            let (unrepaired, kept) = repair([path])
            if let why = unrepaired[PathKey(path)] {
                damaged.unrepaired(path, reason: why)
                report("\(path) is damaged and not repaired: \(why); it is not served until it is "
                       + "('syncpeer verify \(root)' tries again; 'syncpeer status' lists it)")
            } else {
                damaged.clear(path)
                let version = kept[PathKey(path)].map { "; the damaged copy is kept as version \($0)" } ?? ""
                report("\(path) was damaged and is repaired from a peer\(version)")
            }
        }
    }

    /// The damaged files `status` shows: those still under the stamp they were found damaged
    /// under (a file changed or removed since is no longer listed).
    func damagedFiles() -> [DamagedFiles.Entry] {
        let entries = damaged.entries
        guard !entries.isEmpty, let index else { return [] }
        // (One query, without the chunk lists; an index that cannot say keeps them listed.)
        guard let records = try? index.files(folderID: id, paths: entries.map(\.path), includeChunks: false, keyedBy: PathKey.init(_:))
        else { return entries }
        return entries.filter { entry in
            guard let record = records[PathKey(entry.path)], !record.entry.deleted,
                  record.size == entry.stamp.size, record.mtimeNs == entry.stamp.mtimeNs, record.inode == entry.stamp.inode else {
                damaged.clear(entry.path)
                return false
            }
            return true
        }
    }
}

internal import PeerModel
internal import PeerFiles
internal import PeerIndex

/// What the scanner already knows, read from the index in pages by path as the scan goes,
/// so a folder's records (and their chunk lists) are never all in memory at once.
///
/// The scan records its changes while it reads: records changed after it started (their
/// sequence is above the folder's counter at the start) are left out, so none of its own
/// writes is read back as known. (It writes only paths it has walked past, which it does
/// not read again: for every other path, what it reads is what the index held at the start.)
struct IndexKnownEntries: KnownEntrySource {
    let index: NodeIndex
    let folderID: String
    let maxSequence: Int64
    /// Records read at a time.
    let pageSize: Int

    init(index: NodeIndex, folderID: String, pageSize: Int = 500) {
        self.index = index
        self.folderID = folderID
        self.pageSize = max(1, pageSize)
        // (An index that cannot say: nothing is known, every file is read again and compared
        // with its record when recorded, and no deletion is inferred; cost only.)
        maxSequence = (try? index.maxSequence(folderID: folderID)) ?? 0
    }

    func knownEntries(under prefix: String) -> any IteratorProtocol<ScannedEntry> {
        KnownEntryPages(source: self, prefix: prefix)
    }

    fileprivate func known(_ record: FileRecord) -> ScannedEntry? {
        // (The fields are read from `entry` itself: through the record's key-path lookup each
        // read is a generic call, 1-2 % of a rescan of unchanged files.)
        let entry = record.entry
        guard !entry.deleted, entry.sequence <= maxSequence else { return nil }
        return ScannedEntry(path: entry.path, kind: entry.kind, size: entry.size, mtimeNs: entry.mtimeNs,
                          mode: entry.mode, inode: record.inode ?? 0, symlinkTarget: entry.symlinkTarget,
                          manifest: record.manifest)
    }
}

/// The known entries at a prefix and below it, one page of the index at a time: the prefix
/// itself first, then the paths between `prefix + "/"` and `prefix + "0"` ('0' follows '/'
/// in byte order), which are exactly those below it.
private final class KnownEntryPages: IteratorProtocol {
    let source: IndexKnownEntries
    var exact: String?
    var after: String?
    let before: String?
    var page: [ScannedEntry] = []
    var position = 0
    var exhausted = false

    init(source: IndexKnownEntries, prefix: String) {
        self.source = source
        exact = prefix.isEmpty ? nil : prefix
        after = prefix.isEmpty ? nil : prefix + "/"
        before = prefix.isEmpty ? nil : prefix + "0"
    }

    func next() -> ScannedEntry? {
        if let path = exact {
            exact = nil
            if let record = (try? source.index.file(folderID: source.folderID, path: path)) ?? nil,
               let entry = source.known(record) {
                return entry
            }
        }
        while position == page.count {
            guard !exhausted else { return nil }
            let records = (try? source.index.files(folderID: source.folderID, afterPath: after, beforePath: before,
                                                   liveOnly: true, maxSequence: source.maxSequence,
                                                   limit: source.pageSize)) ?? []
            exhausted = records.count < source.pageSize
            after = records.last?.path ?? after
            page = records.compactMap(source.known)
            position = 0
        }
        position += 1
        return page[position - 1]
    }
}

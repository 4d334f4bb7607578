import PeerModel
import PeerFiles
import PeerIndex
import Testing
@testable import SyncEngine

/// The scanner's view of the index, read page by page: each subtree in byte order, the
/// same entries an in-memory list gives, and nothing written after the scan started.
@Suite struct IndexKnownEntriesTests {
    static let device = String(repeating: "A", count: 56)

    /// A live file of `size` bytes in one chunk (or none when empty), a directory, or a tombstone.
    func record(_ path: String, kind: FileKind = .file, size: Int64 = 3, deleted: Bool = false) -> FileRecord {
        let chunks = kind == .file && size > 0 && !deleted
            ? [FileChunkRecord(offset: 0, size: size, hash: [UInt8](repeating: UInt8(path.utf8.count), count: 32))] : []
        var record = FileRecord(folderID: "f", FileEntry(path: path, kind: kind, size: kind == .file ? size : 0, mtimeNs: 42, mode: kind == .directory ? 0o755 : 0o644, deleted: deleted, version: [Self.device: 1], modifiedBy: Self.device), inode: UInt64(path.utf8.count), chunks: chunks)
        record.rootHash = record.chunkManifest?.rootHash
        return record
    }

    func known(_ record: FileRecord) throws -> ScannedEntry {
        let refs = record.chunks.map { ChunkRef(offset: UInt64($0.offset), size: UInt32($0.size), hash: ChunkHash(bytes: $0.hash)!) }
        return ScannedEntry(path: record.path, kind: record.kind == .directory ? .directory : .file, size: record.size,
                          mtimeNs: record.mtimeNs, mode: record.mode, inode: record.inode ?? 0,
                          manifest: record.kind == .file ? try Manifest(fileSize: UInt64(record.size), chunks: refs) : nil)
    }

    func drain(_ iterator: any IteratorProtocol<ScannedEntry>) -> [ScannedEntry] {
        var iterator = iterator
        var out: [ScannedEntry] = []
        while let next = iterator.next() { out.append(next) }
        return out
    }

    @Test func subtreesComePageByPageInByteOrderAsAListGivesThem() throws {
        let index = try NodeIndex.inMemory()
        try index.addFolder(id: "f", path: "/f")
        // Between "a" and "a/…" in byte order: "a b", "a.txt"; after them: "a0"; "é" after ASCII.
        let live = [record("a", kind: .directory), record("a b"), record("a.txt", size: 0), record("a/x"), record("a/y", kind: .directory),
                    record("a/y/z"), record("a0"), record("b"), record("é", kind: .directory), record("é/1")]
        try index.upsertFiles(live + [record("a/w", deleted: true), record("gone", deleted: true)])
        let list = KnownEntryList(try live.map(known))
        for pageSize in [1, 2, 500] {
            let source = IndexKnownEntries(index: index, folderID: "f", pageSize: pageSize)
            for prefix in ["", "a", "a/y", "a/y/z", "a b", "b", "é", "missing", "gone"] {
                #expect(drain(source.knownEntries(under: prefix)) == drain(list.knownEntries(under: prefix)),
                        "prefix \"\(prefix)\", pages of \(pageSize)")
            }
        }
    }

    /// A scan records each batch as it goes; the entries it writes past the page read last
    /// (or anywhere) are not read back as if they had been known.
    @Test func whatTheScanRecordsIsNotReadBack() throws {
        let index = try NodeIndex.inMemory()
        try index.addFolder(id: "f", path: "/f")
        try index.upsertFiles([record("a/1"), record("a/3"), record("a/5"), record("a/7")])
        let source = IndexKnownEntries(index: index, folderID: "f", pageSize: 1)
        var iterator = source.knownEntries(under: "a")
        #expect(iterator.next()?.path == "a/1")
        #expect(iterator.next()?.path == "a/3")
        // Recorded now: a/3 changed, a/4 added, a/5 deleted.
        try index.upsertFiles([record("a/3", size: 9), record("a/4"), record("a/5", deleted: true)])
        #expect(iterator.next()?.path == "a/7", "a/4 and a/5 changed after the start: neither is read")
        #expect(iterator.next() == nil)
        #expect(drain(IndexKnownEntries(index: index, folderID: "f").knownEntries(under: "a")).map(\.path) == ["a/1", "a/3", "a/4", "a/7"])
    }
}

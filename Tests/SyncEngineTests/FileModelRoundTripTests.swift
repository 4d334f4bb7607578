import PeerFiles
import PeerIndex
import PeerModel
import PeerWire
import Testing
@testable import SyncEngine

/// One file model from the index to the wire and back: a record stored locally, read,
/// sent as the engine sends it, decoded as a peer decodes it, stored as that peer's remote
/// record and read again is the same entry, for every kind, a tombstone, a link with a
/// target and an entry without one; and its bytes encode the same again.
@Suite struct FileModelRoundTripTests {
    static let me = String(repeating: "A", count: 56)
    static let peer = String(repeating: "B", count: 56)

    /// A live file of `size` bytes in chunks of at most 1,000 (its root is the chunk list's).
    static func file(_ path: String, size: Int64) -> FileRecord {
        let chunks = stride(from: Int64(0), to: size, by: 1_000).map { offset in
            FileChunkRecord(offset: offset, size: min(1_000, size - offset),
                            hash: [UInt8](repeating: UInt8(truncatingIfNeeded: offset / 1_000 + 1), count: 32))
        }
        var record = FileRecord(folderID: "docs", FileEntry(path: path, kind: .file, size: size, mtimeNs: -1_234_567_891,
                                                             mode: 0o640, version: [me: 3, peer: 1], modifiedBy: me),
                                inode: 77, chunks: chunks)
        record.rootHash = record.chunkManifest?.rootHash
        return record
    }

    static let records: [FileRecord] = [
        file("a.bin", size: 2_500),
        file("empty", size: 0),
        FileRecord(folderID: "docs", FileEntry(path: "dir", kind: .directory, mtimeNs: 5, mode: 0o755, version: [peer: 2],
                                               modifiedBy: peer)),
        FileRecord(folderID: "docs", FileEntry(path: "dir/link", kind: .symlink, mtimeNs: 6, mode: 0o777,
                                               symlinkTarget: "../a.bin", version: [me: 1], modifiedBy: me)),
        FileRecord(folderID: "docs", FileEntry(path: "dir/empty-link", kind: .symlink, mtimeNs: 6, mode: 0o777,
                                               symlinkTarget: "", version: [me: 1], modifiedBy: me)),
        FileRecord(folderID: "docs", FileEntry(path: "gone.txt", kind: .file, mtimeNs: 9, mode: 0o644, deleted: true,
                                               version: [me: 4, peer: 2], modifiedBy: me)),
        FileRecord(folderID: "docs", FileEntry(path: "gone-link", kind: .symlink, mtimeNs: 9, mode: 0o777, deleted: true,
                                               version: [me: 2], modifiedBy: me)),
    ]

    @Test func aRecordCrossesIndexWireAndIndexUnchanged() throws {
        let index = try NodeIndex.inMemory()
        try index.upsertPeer(PeerRecord(deviceID: Self.peer, name: "peer", publicKey: [UInt8](repeating: 1, count: 32),
                                        trust: .paired, autoAccept: false, firstSeen: 1, lastSeen: nil, pairedAt: 1,
                                        addresses: []))
        try index.addFolder(id: "docs", path: "/home/u/docs", sharedWith: [Self.peer])
        try index.upsertFiles(Self.records)
        let local = try index.files(folderID: "docs")
        #expect(local.count == Self.records.count)
        #expect(local.first { $0.path == "dir/link" }?.symlinkTarget == "../a.bin")
        #expect(local.first { $0.path == "dir/empty-link" }?.symlinkTarget == "", "an empty target stays empty, not nil")
        #expect(local.first { $0.path == "dir" }?.symlinkTarget == nil, "no target is nil, not \"\"")

        let sent = local.map(FolderService.wireEntry)
        let bytes = FrameEncoder.encode(.indexUpdate(folder: "docs", full: true, entries: sent))
        var reader = FrameReader()
        reader.append(bytes[...])
        guard case let .indexUpdate(_, _, received)? = try reader.next() else {
            Issue.record("not an index update")
            return
        }
        #expect(received == sent)
        #expect(FrameEncoder.encode(.indexUpdate(folder: "docs", full: true, entries: received)) == bytes)

        try index.upsertRemoteFiles(folderID: "docs", deviceID: Self.peer,
                                    received.map { RemoteFileRecord($0.entry, manifest: $0.manifest.isEmpty ? nil : $0.manifest) })
        let remote = try index.remoteFiles(folderID: "docs", deviceID: Self.peer)
        let byPath = Dictionary(uniqueKeysWithValues: remote.map { ($0.path, $0) })
        for record in local {
            #expect(byPath[record.path]?.entry == record.entry, "\(record.path)")
            #expect(byPath[record.path]?.manifest == record.manifest?.encode(), "\(record.path)")
        }
        for original in Self.records {
            let stored = try #require(local.first { $0.path == original.path })
            var expected = original.entry
            expected.sequence = stored.sequence
            #expect(stored.entry == expected, "\(original.path)")
            #expect(stored.chunks == original.chunks && stored.inode == original.inode)
        }
    }
}

import PeerModel
import Foundation
@testable import PeerIndex
import Testing

/// The selection table (0008) and the cluster's tree read from the peers' indexes.
@Suite struct SelectionIndexTests {
    func index() throws -> NodeIndex {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        for n in 1...3 { try index.upsertPeer(samplePeer(n)) }
        try index.addFolder(id: "docs", path: "/home/u/Documents")
        try index.addFolderPeer(folderID: "docs", deviceID: deviceID(2))
        try index.addFolderPeer(folderID: "docs", deviceID: deviceID(3))
        return index
    }

    func remote(_ path: String, _ sequence: Int64, size: Int64 = 2_000, device: Int = 2, kind: FileKind = .file,
                deleted: Bool = false) -> RemoteFileRecord {
        var record = sampleRemote(path, sequence: sequence, device: device, deleted: deleted)
        record.kind = kind
        record.size = deleted || kind != .file ? 0 : size
        if kind != .file { record.manifest = nil; record.rootHash = nil }
        return record
    }

    @Test func theSelectionIsReplacedWholeAndGoesWithItsFolder() throws {
        let index = try index()
        #expect(try index.selection(folderID: "docs") == [])
        try index.setSelection(folderID: "docs", paths: ["b", "a/x"])
        #expect(try index.selection(folderID: "docs") == ["a/x", "b"])
        try index.setSelection(folderID: "docs", paths: [])
        #expect(try index.selection(folderID: "docs") == [])
        #expect(throws: IndexError.self) { try index.setSelection(folderID: "nope", paths: ["a"]) }
        try index.setSelection(folderID: "docs", paths: ["a"])
        try index.removeFolder(id: "docs")
        try index.addFolder(id: "docs", path: "/home/u/Documents")
        #expect(try index.selection(folderID: "docs") == [])
    }

    /// One level at a time, with sizes summed below each name (a path counts once at its
    /// largest size), tombstones left out, names with multi-byte characters cut right,
    /// paged by name in byte order, and what is held here.
    @Test func theTreeListsOneLevelWithSizesAndPages() throws {
        let index = try index()
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2), [
            remote("\u{E9}t\u{E9}", 1, kind: .directory), remote("\u{E9}t\u{E9}/\u{1F600}.txt", 2, size: 10),
            remote("\u{E9}t\u{E9}/sub/b.bin", 3, size: 100), remote("a.txt", 4, size: 5), remote("gone.txt", 5, deleted: true),
            remote("z/deep/x", 6, size: 7),
        ])
        // Carol holds the same smiley file at another size, and one more file.
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(3), [
            remote("\u{E9}t\u{E9}/\u{1F600}.txt", 1, size: 30, device: 3), remote("b", 2, size: 1, device: 3),
        ])
        var here = sampleFile("docs", "\u{E9}t\u{E9}/sub/b.bin")
        here.size = 100
        try index.upsertFiles([here])

        let root = try index.clusterTree(folderID: "docs", directory: "", afterName: nil, limit: 10)
        #expect(root.map(\.name) == ["a.txt", "b", "z", "\u{E9}t\u{E9}"])
        let ete = try #require(root.last)
        #expect(ete.isDirectory && ete.files == 2 && ete.bytes == 130 && ete.localFiles == 1 && ete.localBytes == 100)
        #expect(root[0].isDirectory == false && root[0].bytes == 5 && root[2].isDirectory && root[2].files == 1)

        let below = try index.clusterTree(folderID: "docs", directory: "\u{E9}t\u{E9}", afterName: nil, limit: 10)
        #expect(below.map(\.name) == ["sub", "\u{1F600}.txt"], "\(below)")
        #expect(below.map(\.bytes) == [100, 30])

        let first = try index.clusterTree(folderID: "docs", directory: "", afterName: nil, limit: 2)
        let second = try index.clusterTree(folderID: "docs", directory: "", afterName: first.last?.name, limit: 2)
        #expect(first.map(\.name) + second.map(\.name) == root.map(\.name))
        #expect(try index.clusterTree(folderID: "docs", directory: "a.txt", afterName: nil, limit: 10).isEmpty)
        #expect(try index.clusterTree(folderID: "docs", directory: "nowhere", afterName: nil, limit: 10).isEmpty)
    }
}

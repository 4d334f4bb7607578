@testable import PeerIndex
import Testing

/// The root identity of a folder (device and inode), as `SharedFolder` records it.
struct FolderRootIndexTests {
    static let identities: [(UInt64, UInt64)] = [(0, 2), (64_769, 1_234_567), (UInt64.max, UInt64.max - 1), (1 << 63, 7)]

    @Test(arguments: identities)
    func setFolderRootRoundTripsAnyValue(_ device: UInt64, _ inode: UInt64) throws {
        let index = try NodeIndex.inMemory()
        try index.addFolder(id: "f", path: "/f")
        #expect(try index.folder(id: "f")?.rootDevice == nil, "a new folder has no identity yet")
        try index.setFolderRoot(id: "f", device: device, inode: inode)
        let record = try #require(try index.folder(id: "f"))
        #expect(record.rootDevice == device && record.rootInode == inode)
        #expect(try index.folder(path: "/f")?.rootInode == inode)
    }

    @Test func halfAnIdentityIsNotStored() throws {
        let index = try NodeIndex.inMemory()
        try index.addFolder(id: "f", path: "/f")
        try index.setFolderRoot(id: "f", device: 5, inode: 6)
        try index.setFolderRoot(id: "f", device: 7, inode: nil)
        let record = try #require(try index.folder(id: "f"))
        #expect(record.rootDevice == nil && record.rootInode == nil)
    }

    @Test func anUnknownFolderIsAnError() throws {
        let index = try NodeIndex.inMemory()
        #expect(throws: IndexError.self) { try index.setFolderRoot(id: "nope", device: 1, inode: 2) }
    }
}

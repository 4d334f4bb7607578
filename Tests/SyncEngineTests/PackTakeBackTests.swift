import PeerModel
import Foundation
import Glibc
import PeerFiles
import PeerIndex
@testable import SyncEngine
import Synchronization
import Testing

/// A version kept as a pack is never a file the applier puts back into the folder: when the
/// user moves a directory just as a peer's edit of a large file in it is renamed in, the
/// applier takes its file back and swaps the user's old file back in. Before, the old inode
/// had already become a pack by then, so the user's live file was the kept version, and an
/// edit in place lost it (`restore` refused it as damaged).
@Suite(.serialized) struct PackTakeBackTests {
    @Test func aFileSwappedBackIntoTheFolderIsNeverAPack() throws {
        let fixture = try FolderHostTests.Fixture()
        defer { fixture.cleanup() }
        let base = (fixture.root as NSString).deletingLastPathComponent
        let keeper = VersionKeeper(versionsDirectory: base + "/versions", index: fixture.host.index)
        fixture.host.versions = keeper
        let remote = fixture.host.remoteDevice
        try FileManager.default.createDirectory(atPath: fixture.host.remoteRoot + "/sub", withIntermediateDirectories: true)
        try fixture.host.index.upsertRemoteFiles(folderID: fixture.folderID, deviceID: remote, [
            RemoteFileRecord(FileEntry(path: "sub", kind: .directory, mtimeNs: 1, mode: 0o755, version: [remote: 1], modifiedBy: remote, sequence: 1)),
        ], receivedSequence: 1)
        let original = try fixture.remoteHas("sub/disk.img", size: 4 << 20, seed: 21)
        let folder = fixture.start()
        defer { folder.stop() }
        try TransferPair.eventually("disk.img is pulled and recorded", timeout: 30) {
            fixture.holds("sub/disk.img", original)
                && ((try? fixture.host.index.file(folderID: fixture.folderID, path: "sub/disk.img")) ?? nil) != nil
        }

        // The user moves sub away just as the peer's edit of disk.img is renamed into it.
        let root = fixture.root
        PlacementSeam.hook.withLock { $0 = { at, paths in
            guard at == root, paths.contains("sub/disk.img") else { return }
            PlacementSeam.hook.withLock { $0 = nil }
            rename(root + "/sub", root + "/moved")
        } }
        defer { PlacementSeam.hook.withLock { $0 = nil } }
        var edited = [UInt8](original)
        edited.replaceSubrange(2_000_000..<2_064_000, with: VersionStoreTests.random(64_000, seed: 22))
        try fixture.remoteHas("sub/disk.img", size: edited.count, seed: 0, version: [remote: 2], content: Data(edited))
        folder.pullSoon([PathKey("sub/disk.img")], bytes: edited.count)

        // Taken back: the user's old file is in the moved directory, and is scanned there.
        try TransferPair.eventually("the old file is back, in the moved directory", timeout: 30) {
            fixture.holds("moved/disk.img", original)
                && ((try? fixture.host.index.file(folderID: fixture.folderID, path: "moved/disk.img")) ?? nil) != nil
        }
        // The user edits it in place (a VM image, a database).
        let fd = open(root + "/moved/disk.img", O_WRONLY)
        var byte = original[3_000_000] ^ 0x5a
        #expect(pwrite(fd, &byte, 1, 3_000_000) == 1)
        close(fd)
        try TransferPair.eventually("the edit is scanned", timeout: 30) {
            ((try? fixture.host.index.file(folderID: fixture.folderID, path: "moved/disk.img")) ?? nil)?.version[fixture.host.localDevice] != nil
        }

        // No pack is the live file (or any other file: one link each).
        var live = stat()
        try #require(stat(root + "/moved/disk.img", &live) == 0)
        let packs = keeper.store.packs!
        for pack in packs.files() {
            var st = stat()
            #expect(stat(packs.path(pack.name), &st) == 0 && st.st_ino != live.st_ino && st.st_nlink == 1, "pack \(pack.name) is linked elsewhere")
        }
        // Every version listed as held here reads back whole, each chunk verified.
        let ids = try fixture.host.index.versionAges(folderID: fixture.folderID).map(\.id)
        for id in ids {
            let version = try #require(try fixture.host.index.version(folderID: fixture.folderID, id: id))
            guard version.held else { continue }
            let read = version.chunks.map { keeper.store.read(ChunkHash(bytes: $0.hash)!, size: Int($0.size)) }
            #expect(!read.contains { $0 == nil }, "\(version.path) (\(version.reason)) is listed as held, but a chunk is lost")
        }
    }
}

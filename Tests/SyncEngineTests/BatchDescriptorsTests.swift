import Foundation
import PeerFiles
import Testing
@testable import SyncEngine

/// What a batch of pulled files counts against `FolderApplier.batchDescriptors`: the
/// descriptors it really holds open.
struct BatchDescriptorsTests {
    @Test func filesOfOneFolderCountTheirFolderOnce() throws {
        let base = FileManager.default.temporaryDirectory.path + "/batch-descriptors-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: base + "/a", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: base + "/b", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let root = try DirectoryHandle(path: base)
        let a = try root.openSubdirectory("a"), b = try root.openSubdirectory("b")
        var count = FolderApplier.BatchDescriptors()
        // 1,000 files in "a" (one shared handle, as `ParentHandles` gives them), each with its
        // temporary open: 1,001 descriptors. Counted 2 per file before: 2,000, and the batch
        // was sealed at half the files its descriptors allowed.
        for fd in 0..<1_000 { count.add(fd: Int32(fd), directory: a, root: root) }
        #expect(count.count == 1_001)
        // Links (no descriptor of their own) at the root add nothing; another folder's handle once.
        count.add(fd: -1, directory: root, root: root)
        count.add(fd: -1, directory: b, root: root)
        count.add(fd: 7, directory: b, root: root)
        #expect(count.count == 1_003)
        // The same folder opened again (a new handle: the cache was emptied) is a descriptor more.
        let again = try root.openSubdirectory("a")
        count.add(fd: 8, directory: again, root: root)
        #expect(count.count == 1_005)
        count.addFile()
        #expect(count.count == 1_006)
    }
}

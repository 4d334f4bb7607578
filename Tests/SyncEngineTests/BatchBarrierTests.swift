import Testing
@testable import SyncEngine

/// Which durability barrier a batch of pulled files gets (`FolderApplier.syncsPerFile`).
struct BatchBarrierTests {
    @Test func aFewFilesAreFlushedOneByOne() {
        for items in 0...FolderApplier.perFileSyncLimit {
            #expect(FolderApplier.syncsPerFile(items: items, madeDirectories: false))
        }
    }

    @Test func manyFilesShareOneSyncfs() {
        #expect(!FolderApplier.syncsPerFile(items: FolderApplier.perFileSyncLimit + 1, madeDirectories: false))
        #expect(!FolderApplier.syncsPerFile(items: 256, madeDirectories: false))
    }

    @Test func afterANewFolderEveryBatchTakesSyncfs() {
        // A per-file barrier would not make the new folder's own entry durable.
        #expect(!FolderApplier.syncsPerFile(items: 1, madeDirectories: true))
    }
}

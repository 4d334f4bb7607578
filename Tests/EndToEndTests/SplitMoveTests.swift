import Foundation
import Testing

/// A move whose two halves reach a peer in separate pulls is not a mass deletion
/// (MassChangeGuard+Moves). Alice moves 4 of her 6 files the way a move across file systems
/// does (copy, then delete the original), and deletes 2: bob gets the copies first, then the
/// 6 deletions. Only 2 files are lost, so bob applies it all without asking. Before: bob
/// held "peers' changes would delete or replace 6 of 10 files" (what SelectiveSyncBoundaryTests
/// met under load, where alice's scanner sent the new paths before the deletions).
@Suite(.serialized)
struct SplitMoveTests {
    @Test func aMoveInTwoHalvesIsNotHeldAsAMassDeletion() throws {
        let names = ["a", "b", "c", "d", "e", "f"]
        let pair = try FolderRoleTests.Pair(files: Dictionary(uniqueKeysWithValues: names.map { ("\($0).txt", "file \($0)") }))
        defer { pair.stop() }
        let (bob, here, there) = (pair.bob, pair.aliceFolder, pair.bobFolder)

        for name in names.prefix(4) { try FileManager.default.copyItem(atPath: "\(here)/\(name).txt", toPath: "\(here)/moved-\(name).txt") }
        try FolderSyncTests.eventually("the copies reach bob") { pair.names(there).count == 10 }
        for name in names { try FileManager.default.removeItem(atPath: "\(here)/\(name).txt") }

        let moved = ["moved-a.txt", "moved-b.txt", "moved-c.txt", "moved-d.txt"]
        try FolderSyncTests.eventually("the moves and deletions reach bob: \(pair.names(there))") { pair.names(there) == moved }
        for name in names.prefix(4) { #expect(pair.text(there, "moved-\(name).txt") == "file \(name)") }
        #expect(bob.events("folder").allSatisfy { ($0["reason"] as? String)?.contains("holding") != true },
                "bob asked to confirm a move")
    }
}

import Foundation
@testable import SyncEngine
import Synchronization
import Testing

/// Fan-out follows the roles as our index pages do (FolderService+Fanout): what a node
/// fetches is another member's change, announced to every member; its own change coming back
/// (`ownChange`) is not announced to a member it is receive-only towards.
@Suite struct HeldRolesTests {
    /// Bob tells alice what he holds of files he fetches (`chunkHave`). Once he is receive-only
    /// towards alice, she hears of another member's change, not of his own (before, of both).
    @Test func ourOwnChangeBeingFetchedIsNotAnnouncedToAMemberWeAreReceiveOnlyTowards() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        pair.alice.speaksChunkHave.withLock { $0 = true }
        let (_, folderID) = try pair.joinedFolder()
        try TransferPair.eventually("bob's folder runs") { pair.bob.folders.state.withLock { $0.folders[folderID] } != nil }
        let folder = try #require(pair.bob.folders.state.withLock { $0.folders[folderID] })
        try TransferPair.eventually("bob's folder serves") { folder.servesHeld("any.bin") }
        func announce(_ path: String, ownChange: Bool) {
            pair.bob.folders.announceHeld(folder, .init(path: path, root: [UInt8](repeating: 7, count: 32), count: 2, bitmap: [1],
                                                        ownChange: ownChange))
        }
        func told() -> [String] { pair.bob.chunkHavesSent.withLock { $0.map(\.path) } }
        announce("ours-both.bin", ownChange: true)
        announce("theirs-both.bin", ownChange: false)
        try TransferPair.eventually("alice hears of both while bob's role is both") {
            told().contains("ours-both.bin") && told().contains("theirs-both.bin")
        }
        try pair.bob.folders.setRole(folderID: folderID, devices: [pair.alice.deviceKey], role: .receiveOnly, noDeletes: nil)
        announce("ours.bin", ownChange: true)
        announce("theirs.bin", ownChange: false)
        // (Sent in order: once the second is there, the first was decided.)
        try TransferPair.eventually("alice hears of another member's change") { told().contains("theirs.bin") }
        #expect(!told().contains("ours.bin"), "bob's own change was announced to a member he is receive-only towards")
    }
}

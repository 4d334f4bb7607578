import Foundation
import PeerFiles
import PeerIndex
import PeerWire
@testable import SyncEngine
import Synchronization
import TestKit
import Testing

/// A member's announced selection (`Frame.folderSelection`, issue 41) over the in-memory
/// link: it is kept for the member's completion figures only. A hostile one hides nothing
/// from that member and stops nothing it is entitled to: blocks outside it are served, its
/// deletions outside it are applied, and an unsafe or foreign announcement is dropped.
@Suite struct PeerSelectionTests {
    @Test func anAnnouncementChangesNoServingNorApplying() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs + "/x", withIntermediateDirectories: true)
        try "outside".write(toFile: docs + "/a.txt", atomically: false, encoding: .utf8)
        try "inside".write(toFile: docs + "/x/b.txt", atomically: false, encoding: .utf8)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        let received = pair.bob.directory + "/docs"
        try TransferPair.eventually("bob holds both files") {
            FileManager.default.fileExists(atPath: received + "/a.txt") && FileManager.default.fileExists(atPath: received + "/x/b.txt")
        }

        // Bob says he holds only "x": alice keeps it, for bob only.
        pair.bob.sendRaw([.folderSelection(folder: shared.folder, paths: ["x"])])
        try TransferPair.eventually("alice keeps bob's selection") {
            pair.alice.folders.peerSelection(shared.folder, device: pair.bob.deviceKey)?.paths == ["x"]
        }
        // A block of a file outside it is still served to him.
        let record = try #require(try pair.alice.index.file(folderID: shared.folder, path: "a.txt"))
        let chunk = try #require(record.chunks.first)
        let answer = Mutex<(done: Bool, reply: BlockReply?)>((false, nil))
        let want = BlockWant(device: pair.alice.deviceKey, folder: shared.folder, path: "a.txt", offset: UInt64(chunk.offset),
                             size: UInt32(chunk.size), hash: chunk.hash, sums: nil) { reply in answer.withLock { $0 = (true, reply) } }
        pair.bob.folders.requestBlocks([want])
        try TransferPair.eventually("alice answers") { answer.withLock { $0.done } }
        guard case let .whole(bytes)? = answer.withLock({ $0.reply }) else {
            Issue.record("a block outside bob's announced selection was refused")
            return
        }
        #expect(bytes == Array("outside".utf8))
        // His deletion outside it is applied as any member's.
        try FileManager.default.removeItem(atPath: received + "/a.txt")
        _ = try pair.bob.folders.rescanFolder(directory: received, path: nil)
        try TransferPair.eventually("bob's deletion outside what he announced reaches alice") {
            !FileManager.default.fileExists(atPath: docs + "/a.txt")
        }

        // An unsafe path drops what he said (he counts as holding everything); an
        // announcement for a folder alice does not have is not kept.
        pair.bob.sendRaw([.folderSelection(folder: shared.folder, paths: ["x", "../etc"])])
        try TransferPair.eventually("the unsafe announcement is dropped") {
            pair.alice.folders.peerSelection(shared.folder, device: pair.bob.deviceKey) == nil
        }
        #expect(pair.alice.events.errors.contains { $0.contains("not safe") }, "\(pair.alice.events.errors)")
        pair.bob.sendRaw([.folderSelection(folder: "zzzzz-zzzzz", paths: ["x"]),
                          .folderSelection(folder: shared.folder, paths: [])])
        // Delivered on alice's queue, in order: once the last is handled, both are.
        try TransferPair.eventually("the announcements are handled") {
            pair.alice.folders.queue.sync { pair.alice.folders.state.withLock { $0.peerSelections.isEmpty } }
        }
        #expect(pair.alice.folders.peerSelection("zzzzz-zzzzz", device: pair.bob.deviceKey) == nil)
    }

    /// A selection change is announced to a member whose hello lists `selection`, again on
    /// each change; a member without the feature (an older version) is never sent the frame.
    @Test(arguments: [true, false])
    func aChangeIsAnnouncedOnlyToAPeerWithTheFeature(_ feature: Bool) throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        pair.alice.speaksSelection.withLock { $0 = feature }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs + "/x", withIntermediateDirectories: true)
        try "inside".write(toFile: docs + "/x/b.txt", atomically: false, encoding: .utf8)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        let received = pair.bob.directory + "/docs"
        try TransferPair.eventually("bob holds the file") { FileManager.default.fileExists(atPath: received + "/x/b.txt") }
        _ = try pair.bob.folders.select(directory: received, paths: ["x"])
        _ = try pair.bob.folders.select(directory: received, paths: [])
        _ = try pair.bob.folders.select(directory: received, paths: ["x"])
        // The announcements go from bob's queue: once it has turned, they are sent.
        for _ in 0..<3 { pair.bob.sync {}; pair.alice.sync {} }
        let sent = pair.bob.selectionsSent.withLock { $0 }
        if feature {
            #expect(Array(sent.suffix(3)) == [["x"], [], ["x"]], "\(sent)")
            try TransferPair.eventually("alice keeps bob's latest") {
                pair.alice.folders.peerSelection(shared.folder, device: pair.bob.deviceKey)?.paths == ["x"]
            }
        } else {
            #expect(sent.isEmpty, "a peer without the feature was sent \(sent)")
            #expect(pair.alice.folders.peerSelection(shared.folder, device: pair.bob.deviceKey) == nil)
        }
    }
}

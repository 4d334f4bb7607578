import Foundation
import PeerIndex
import PeerWire
@testable import SyncEngine
import Synchronization
import Testing

/// The folder service on its own (issue 12): two ends over the in-memory link of
/// `TransferPair`, each with its own in-memory index and real folders, no sockets or
/// processes. Sharing, accepting, the index exchange and block pulls all cross the link.
@Suite struct FolderServiceTests {
    static func contents(_ root: String) -> [String: Data] {
        var out: [String: Data] = [:]
        for path in (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? [] where !path.hasPrefix(".syncpeer") {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                out[path] = FileManager.default.contents(atPath: root + "/" + path)
            }
        }
        return out
    }

    /// alice shares a folder with bob, who accepts it automatically: bob gets a new folder
    /// named after the label, with alice's files; an edit of alice's follows.
    @Test func aSharedFolderArrivesWholeAndAnEditFollows() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs + "/notes", withIntermediateDirectories: true)
        try TransferPair.randomFile(docs + "/big.bin", size: 2 << 20, seed: 21)
        try "first".write(toFile: docs + "/notes/a.txt", atomically: false, encoding: .utf8)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        #expect(shared.label == "docs" && shared.peers.map(\.name) == ["bob"])
        let received = pair.bob.directory + "/docs"
        try TransferPair.eventually("bob holds alice's files") { Self.contents(received) == Self.contents(docs) }
        #expect(Self.contents(received).count == 2)
        try "second, longer".write(toFile: docs + "/notes/a.txt", atomically: false, encoding: .utf8)
        try TransferPair.eventually("the edit reaches bob") {
            (try? String(contentsOfFile: received + "/notes/a.txt", encoding: .utf8)) == "second, longer"
        }
        #expect(pair.bob.events.errors.isEmpty && pair.alice.events.errors.isEmpty, "\(pair.bob.events.errors) \(pair.alice.events.errors)")
        // Both see the other as a member of the same folder.
        #expect(try pair.bob.index.folderPeers(folderID: shared.folder).map(\.deviceID) == [pair.alice.deviceKey])
    }

    /// A peer's folder ID becomes a name on our disk and in the index: one that is not a
    /// safe name is refused before it is stored or shown.
    @Test(arguments: ["../etc", "a/b", "", String(repeating: "x", count: 300)])
    func aShareOfferWithAnUnsafeFolderIDIsRefused(_ id: String) throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.connect()
        pair.alice.sendRaw([.shareOffer(folder: id, label: "docs")])
        try TransferPair.eventually("bob refuses it") { !pair.bob.events.errors.isEmpty }
        #expect(pair.bob.events.errors.first?.contains("invalid folder ID") == true, "\(pair.bob.events.errors)")
        #expect(try pair.bob.index.folderOffers().isEmpty && pair.bob.index.folders().isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.bob.directory).isEmpty)
    }

    /// A peer that is not a member asks for blocks of a folder, or a member asks for what is
    /// not shared: each request is answered "no", and when they pile up the user is told.
    @Test func blockRequestsForWhatIsNotSharedAreRefusedAndReported() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "secret".write(toFile: pair.alice.directory + "/outside.txt", atomically: false, encoding: .utf8)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("bob has joined") { (try? pair.bob.index.folders().count) == 1 }
        for n in 0..<FolderService.refusalsReported {
            let path = n.isMultiple(of: 2) ? "../outside.txt" : "missing.txt"
            pair.bob.sendRaw([.blockRequest(request: UInt32(1_000 + n), folder: shared.folder, path: path, offset: 0, size: 6,
                                            hash: [UInt8](repeating: 0, count: 32))])
        }
        try TransferPair.eventually("alice reports the probing") {
            pair.alice.events.all.contains { if case let .refused(refusal) = $0 { refusal.reason.contains("probing") } else { false } }
        }
    }

    /// A member's index entries are hostile input: one whose path leaves the folder is
    /// ignored (and said), the rest is stored.
    @Test func indexEntriesWithUnsafePathsAreIgnored() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("bob has joined") { (try? pair.bob.index.folders().count) == 1 }
        let entry = { (path: String) in
            SyncFileEntry(path: path, kind: .directory, size: 0, mtimeNanoseconds: 1, mode: 0o755, deleted: false, symlinkTarget: "",
                          version: [.init(device: pair.bob.deviceKey, counter: 1)], sequence: 1, modifiedBy: pair.bob.deviceKey,
                          rootHash: [], manifest: [])
        }
        pair.bob.sendRaw([.indexUpdate(folder: shared.folder, full: false, entries: [entry("../escape"), entry("fine")])])
        try TransferPair.eventually("alice ignores the unsafe entry") { pair.alice.events.errors.contains { $0.contains("unsafe path") } }
        try TransferPair.eventually("the safe one is applied") {
            FileManager.default.fileExists(atPath: docs + "/fine")
        }
        #expect(!FileManager.default.fileExists(atPath: pair.alice.directory + "/escape"))
    }
}

import Foundation
import PeerCrypto
import PeerFiles
import PeerNet
import Synchronization
import Testing
@testable import Wormhole

/// `resume-v1` between two ends on loopback, with real partial files: a chunk that fails its
/// hash is never written, the next attempt asks only for what is missing, a manifest that is
/// not the offered one is refused before any file is made, and every count from the wire is
/// bounded.
struct ResumableTransferTests {
    static let key = SecureBytes([UInt8](repeating: 9, count: 32))

    /// A folder with `inbox/` and `a.bin` (random bytes) and the file's manifest.
    struct Files {
        let root: String
        let data: [UInt8]
        let manifest: Manifest
        var inbox: String { root + "/inbox" }
        var source: String { root + "/a.bin" }

        init(size: Int = 400_000) throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("resume-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: root + "/inbox", withIntermediateDirectories: true)
            data = (0..<size).map { _ in UInt8.random(in: 0...255) }
            try Data(data).write(to: URL(fileURLWithPath: root + "/a.bin"))
            manifest = try FileChunker.manifest(ofFileAt: root + "/a.bin")
        }

        var offer: WormholeResume.Offer { WormholeResume.Offer(root: manifest.rootHash, chunks: manifest.chunks.count) }
        var partialPath: String { inbox + "/.syncpeer-partial/" + WormholePartials.transferID(root: manifest.rootHash) + ".part" }
        func bytes(_ chunk: ChunkRef) -> [UInt8] { Array(data[Int(chunk.offset)..<Int(chunk.end)]) }
        func remove() { try? FileManager.default.removeItem(atPath: root) }
    }

    /// Receives `offer` into `files.inbox` from a sender on loopback running `sender`.
    func receive(_ files: Files, offer: WormholeResume.Offer, report: WormholeTransferReport = WormholeTransferReport(),
                 sender: @escaping @Sendable (TransitConnection) throws -> Void) throws(WormholeError) -> PartialFile {
        let port: UInt16
        do {
            port = try HostileServerTests.server { stream in
                try sender(try TransitConnection(stream: stream, sendKey: Self.key, receiveKey: Self.key, description: "sender", leftover: []))
            }
        } catch { throw .transfer("\(error)") }
        let stream: TCPConnection
        do { stream = try TCPConnection.connect(host: "127.0.0.1", port: port, timeout: .seconds(5)) } catch { throw .transfer("\(error)") }
        let connection: TransitConnection
        do { connection = try TransitConnection(stream: stream, sendKey: Self.key, receiveKey: Self.key, description: "receiver", leftover: []) } catch {
            throw .transfer("\(error)")
        }
        defer { connection.close() }
        let partial = try ResumableReceive(connection: connection, offer: offer, size: Int64(files.data.count), directory: files.inbox, report: report).run()
        try connection.send(WormholeResume.ack(root: offer.root))
        return partial
    }

    @Test func aChunkThatFailsItsHashIsNeverWrittenAndTheNextAttemptAsksOnlyForTheRest() throws {
        let files = try Files()
        defer { files.remove() }
        let chunks = files.manifest.chunks
        try #require(chunks.count >= 3)
        // A sender whose second chunk is not what its manifest says.
        #expect(throws: WormholeError.protocolViolation("chunk 1 does not match its hash")) {
            try receive(files, offer: files.offer) { sender in
                try sender.send(files.manifest.encode())
                _ = try sender.receive(deadline: .now + .seconds(5))
                try sender.send(files.bytes(chunks[0]))
                var bad = files.bytes(chunks[1])
                bad[0] ^= 1
                try sender.send(bad)
            }
        }
        let kept = try FileManager.default.attributesOfItem(atPath: files.partialPath)[.size] as? Int
        #expect(kept == Int(chunks[0].size), "only the verified chunk is in the partial file")

        // Sent again (the real sender): the receiver names chunk 0 as held; only the rest crosses.
        let resumed = Mutex<[Int64]>([])
        let report = WormholeTransferReport(resumed: { held in resumed.withLock { $0.append(held) } })
        let partial = try receive(files, offer: files.offer, report: report) { sender in
            try ResumableSend(connection: sender, path: files.source, manifest: files.manifest, report: report).run()
        }
        #expect(resumed.withLock { $0 } == [Int64(chunks[0].size), Int64(chunks[0].size)], "both ends count the chunk held as not sent")
        #expect(try Data(contentsOf: URL(fileURLWithPath: partial.path)) == Data(files.data))
    }

    @Test func aManifestThatIsNotTheOfferedOneIsRefusedBeforeAnyFileIsMade() throws {
        let files = try Files()
        defer { files.remove() }
        let other = WormholeResume.Offer(root: [UInt8](repeating: 1, count: 32), chunks: files.manifest.chunks.count)
        #expect(throws: WormholeError.protocolViolation("the manifest does not match the offer")) {
            try receive(files, offer: other) { try $0.send(files.manifest.encode()) }
        }
        // A manifest longer than the chunk count offered: refused at the first record past it.
        let fewer = WormholeResume.Offer(root: files.manifest.rootHash, chunks: 1)
        #expect(throws: WormholeError.protocolViolation("the manifest is not the length its 1 offered chunks take")) {
            try receive(files, offer: fewer) { try $0.send(files.manifest.encode()) }
        }
        #expect(!FileManager.default.fileExists(atPath: files.inbox + "/.syncpeer-partial"))
    }

    /// The offer's field as JSON (nil: none), the offered size, and the refusal expected.
    @Test(arguments: [
        (nil, 100, nil),
        (#"{"root": "zz", "chunks": 1}"#, 100, "a malformed resume offer"),
        (#"{"root": "abababababababababababababababababababababababababababababababab", "chunks": "2"}"#, 100, "a malformed resume offer"),
        (#"{"root": "abababababababababababababababababababababababababababababababab", "chunks": 2}"#, 100, "a resume offer of 2 chunks for 100 bytes"),
        (#"{"root": "abababababababababababababababababababababababababababababababab", "chunks": 4097}"#, 64 << 20, "a resume offer of 4097 chunks for 67108864 bytes"),
        (#"{"root": "abababababababababababababababababababababababababababababababab", "chunks": 4096}"#, 64 << 20, nil),
    ] as [(String?, Int64, String?)])
    func offersAreBoundedByWhatTheChunkerCanCut(_ json: String?, size: Int64, refusal: String?) throws {
        let field = try json.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) }
        if let refusal {
            #expect(throws: WormholeError.protocolViolation(refusal)) { try WormholeResume.Offer(field: field, size: size) }
        } else {
            let offer = try WormholeResume.Offer(field: field, size: size)
            #expect((offer == nil) == (field == nil))
        }
    }

    @Test func theRecordOfHeldChunksIsExact() throws {
        #expect(try WormholeResume.missing(bitmap: WormholeResume.bitmap(holding: [0, 2, 9], count: 10), count: 10) == [1, 3, 4, 5, 6, 7, 8])
        #expect(try WormholeResume.missing(bitmap: [], count: 0) == [])
        #expect(throws: WormholeError.protocolViolation("a record of held chunks of 3 bytes for 10 chunks")) {
            try WormholeResume.missing(bitmap: [0, 0, 0], count: 10)
        }
        #expect(throws: WormholeError.protocolViolation("a record of held chunks names chunks past the last")) {
            try WormholeResume.missing(bitmap: [0, 0b100], count: 10)
        }
    }

    /// A folder keeps at most `maxKeptPartials` wormhole partial files: a new one removes the oldest.
    @Test func partialFilesInAFolderAreBounded() throws {
        let files = try Files(size: 10)
        defer { files.remove() }
        let roots = (0..<6).map { [UInt8](repeating: UInt8($0), count: 32) }
        for (n, root) in roots.enumerated() {
            _ = try WormholePartials.open(root: root, in: files.inbox)
            let path = files.inbox + "/.syncpeer-partial/" + WormholePartials.transferID(root: root) + ".part"
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: Double(n * 60 - 1_000))], ofItemAtPath: path)
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: files.inbox + "/.syncpeer-partial").sorted()
        #expect(left == roots.suffix(WormholeResume.maxKeptPartials).map { WormholePartials.transferID(root: $0) + ".part" }.sorted())
    }
}

import Foundation
import Glibc
import PeerCrypto
import PeerFiles
@testable import PeerNet
import PeerWire
import Testing

/// A hostile sender of files: like `RogueClient` (TCP + the real Noise handshake, with its
/// own identity, or a given one to come back as the same peer), plus a reader thread that answers the daemon's pings (so the session is not dropped as dead
/// while the test waits elsewhere) and keeps every other frame for the test to take.
final class RogueSender: Sendable {
    let keyPair: KeyPair
    let channel: SecureChannel
    let name: String
    private let inbox = FrameInbox()

    init(port: UInt16, name: String, keyPair: KeyPair = .generate(), features: [String] = ["messages"]) throws {
        self.name = name
        self.keyPair = keyPair
        let stream = try TCPConnection.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        let hello = Hello(displayName: name, softwareVersion: "rogue-sender 0.0.1", features: features, listenPort: nil)
        let channel = try SecureChannel.initiate(over: stream, staticKey: keyPair, hello: hello, timeout: .seconds(5))
        self.channel = channel
        let inbox = inbox
        let reader = Thread {
            while !inbox.isStopping {
                do throws(NetError) {
                    guard let frame = try channel.receive(deadline: .now + .milliseconds(200)) else {
                        inbox.end("end of stream")
                        return
                    }
                    if case let .ping(nonce) = frame {
                        try? channel.send(.pong(nonce))
                    } else {
                        inbox.append(frame)
                    }
                } catch .timedOut {
                    continue
                } catch {
                    inbox.end(error.description)
                    return
                }
            }
        }
        reader.name = "rogue-sender-reader"
        reader.start()
    }

    deinit { close() }

    func close() {
        inbox.stop()
        channel.close()
    }

    func send(_ frames: Frame...) throws { try channel.send(frames) }
    func send(_ frames: [Frame]) throws { try channel.send(frames) }

    /// Removes and returns the first frame received (now or within `seconds`) that matches.
    @discardableResult
    func take(within seconds: Double = 10, sourceLocation: SourceLocation = #_sourceLocation,
              where match: (Frame) -> Bool) throws -> Frame {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let frame = inbox.take(where: match) { return frame }
            if Date() >= deadline || inbox.ended != nil {
                if let frame = inbox.take(where: match) { return frame }
                throw RogueError.noFrame("\(name): no matching frame within \(seconds) s; unclaimed: \(inbox.pending.map(\.description)); connection: \(inbox.ended ?? "open")")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    /// The next frame about transfer `id` (accept, decline, cancel, done, chunkAck).
    func next(_ id: TransferID, within seconds: Double = 10) throws -> Frame {
        try take(within: seconds) { $0.transferID == id }
    }

    /// Frames received and not taken yet.
    var pending: [Frame] { inbox.pending }

    /// Waits until the daemon ends the connection; how it ended, or nil if still open.
    func waitUntilClosed(within seconds: Double) -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let ended = inbox.ended { return ended }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return inbox.ended
    }

    /// With a daemon started with `--auto-accept`: the invitation is answered pending, then
    /// accepted, and the rogue is a paired, connected peer.
    func expectPairedByAutoAccept() throws {
        let pendingFrame = try take { if case .pairing = $0 { true } else { false } }
        #expect(pendingFrame == .pairing(.pending))
        let accepted = try take { if case .pairing = $0 { true } else { false } }
        try #require(accepted == .pairing(.accepted), "bob answered \(accepted)")
    }

    enum RogueError: Error, CustomStringConvertible {
        case noFrame(String)
        var description: String { switch self { case let .noFrame(m): m } }
    }
}

/// Frames the reader thread collected, under a lock.
private final class FrameInbox: @unchecked Sendable {
    // @unchecked: every field is only touched under `lock`.
    private let lock = NSLock()
    private var frames: [Frame] = []
    private var endReason: String?
    private var stopping = false

    func append(_ frame: Frame) { lock.withLock { frames.append(frame) } }
    func end(_ reason: String) { lock.withLock { if endReason == nil { endReason = reason } } }
    func stop() { lock.withLock { stopping = true } }
    var isStopping: Bool { lock.withLock { stopping } }
    var ended: String? { lock.withLock { endReason } }
    var pending: [Frame] { lock.withLock { frames } }

    func take(where match: (Frame) -> Bool) -> Frame? {
        lock.withLock {
            guard let index = frames.firstIndex(where: match) else { return nil }
            return frames.remove(at: index)
        }
    }
}

extension Frame {
    /// The transfer a transfer frame is about; nil for other frames.
    var transferID: TransferID? {
        switch self {
        case let .offer(offer): offer.id
        case let .accept(id, _), let .decline(id, _), let .cancel(id, _), let .done(id, _, _),
             let .chunk(id, _, _), let .chunkAck(id, _, _): id
        default: nil
        }
    }
}

/// A file the rogue offers: content it makes up, cut into chunks of sizes it chooses,
/// and the manifest (built with PeerFiles) that describes them truthfully.
struct ForgedFile {
    let content: [UInt8]
    let chunks: [[UInt8]]
    let manifest: Manifest

    /// Random content made of chunks of `chunkSizes` bytes.
    init(chunkSizes: [Int]) throws {
        var generator = SystemRandomNumberGenerator()
        var chunks: [[UInt8]] = []
        for size in chunkSizes {
            var bytes = [UInt8](repeating: 0, count: size)
            var i = 0
            while i < size {
                var word = generator.next()
                for _ in 0..<min(8, size - i) {
                    bytes[i] = UInt8(truncatingIfNeeded: word)
                    word >>= 8
                    i += 1
                }
            }
            chunks.append(bytes)
        }
        try self.init(chunks: chunks)
    }

    /// Exactly these chunks, in order.
    init(chunks: [[UInt8]]) throws {
        self.chunks = chunks
        content = chunks.flatMap { $0 }
        var refs: [ChunkRef] = []
        var offset: UInt64 = 0
        for chunk in chunks {
            refs.append(ChunkRef(offset: offset, size: UInt32(chunk.count), hash: ChunkHash.of(chunk)))
            offset += UInt64(chunk.count)
        }
        manifest = try Manifest(fileSize: offset, chunks: refs)
    }

    /// An offer entry for this file; `size` and `manifest` may be overridden to lie.
    func entry(path: String, mode: UInt32 = 0o640, mtime: Int64 = 1_600_000_000_000_000_000,
               size: UInt64? = nil, manifest: [UInt8]? = nil) -> TransferOffer.Entry {
        TransferOffer.Entry(path: path, size: size ?? self.manifest.fileSize, mode: mode,
                            mtimeNanoseconds: mtime, manifest: manifest ?? self.manifest.encode())
    }

    /// A single-file offer of this file under `name`.
    func offer(name: String, id: TransferID = .random()) -> TransferOffer {
        TransferOffer(id: id, kind: .file, name: name, entries: [entry(path: name)])
    }

    /// The encoded manifest with one byte of chunk `index`'s hash changed: the chunk list no
    /// longer matches the root hash at the end of the encoding.
    var manifestWithForgedChunkHash: [UInt8] {
        var bytes = manifest.encode()
        // "SPM1" ‖ fileSize u64 ‖ count u32, then (size u32 ‖ hash 32 bytes) per chunk.
        bytes[16 + 4] ^= 0x01
        return bytes
    }

    /// The encoded manifest with one byte of its trailing root hash changed.
    var manifestWithForgedRoot: [UInt8] {
        var bytes = manifest.encode()
        bytes[bytes.count - 1] ^= 0x80
        return bytes
    }
}

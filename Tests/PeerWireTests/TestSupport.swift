import PeerModel
import PeerWire
import TestKit

/// `count` bytes counting up from 0 (wrapping), easy to recognise in a failure.
func pattern(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0) }
}

/// Appends the bytes of `input` to `reader` in pieces that end at `cuts`, draining frames after
/// each piece; returns the frames, and the error if decoding failed.
func decodeFrames(_ input: [UInt8], cuts: [Int]) -> (frames: [Frame], error: WireError?) {
    var reader = FrameReader()
    var frames: [Frame] = []
    var start = 0
    for end in cuts + [input.count] where end >= start {
        reader.append(input[start..<end])
        start = end
        do {
            while let frame = try reader.next() { frames.append(frame) }
        } catch {
            return (frames, error)
        }
    }
    return (frames, nil)
}

/// Random cut points (sorted) splitting `count` bytes into pieces of 1 … `maxPiece` bytes.
func randomCuts(count: Int, maxPiece: Int, using rng: inout SplitMix64) -> [Int] {
    var cuts: [Int] = []
    var position = 0
    while true {
        position += Int.random(in: 1...maxPiece, using: &rng)
        guard position < count else { return cuts }
        cuts.append(position)
    }
}

/// Builds byte strings by hand in tests, independently of the module's writer.
struct Bytes {
    var bytes: [UInt8] = []

    mutating func u8(_ value: Int) { bytes.append(UInt8(value)) }
    mutating func u16(_ value: Int) { bytes += [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    mutating func u32(_ value: Int) { bytes += (0..<4).map { UInt8(value >> (24 - 8 * $0) & 0xFF) } }
    mutating func raw(_ data: [UInt8]) { bytes += data }
    mutating func text(_ string: String) { bytes += Array(string.utf8) }
}

/// A frame header (type code and announced body length) followed by `body`.
func frameBytes(_ code: UInt8, length: Int? = nil, body: [UInt8]) -> [UInt8] {
    var b = Bytes()
    b.u8(Int(code))
    b.u32(length ?? body.count)
    b.raw(body)
    return b.bytes
}

/// One frame of every type with small, varied values.
let sampleFrames: [Frame] = [
    .ping(0),
    .ping(.max),
    .pong(0x0102_0304_0506_0708),
    .message(id: 0, body: []),
    .message(id: 42, body: pattern(300)),
    .pairing(.pending),
    .pairing(.accepted),
    .pairing(.declined),
    .pairing(.expired),
    .pairing(.refused),
    .certificate([0x30]),
    .certificate(pattern(2_048)),
    .close(code: .normal, reason: ""),
    .close(code: .impersonation, reason: "key does not match device ID"),
    .close(code: .unknown(0xBEEF), reason: "from the future"),
    .streamOpen(id: 1, name: "stdin"),
    .streamOpen(id: .max, name: "données-📦"),
    .streamData(id: 1, bytes: []),
    .streamData(id: 1, bytes: pattern(1000)),
    .streamClose(id: 1),
    .streamCredit(id: 1, bytes: .max),
    .streamReset(id: 2, reason: "cut: the writer's input failed"),
    .offer(sampleOffer),
    .offer(TransferOffer(id: sampleTransferID, kind: .folder, name: "photos", entries: [])),
    .accept(id: sampleTransferID, have: []),
    .accept(id: sampleTransferID, have: [0b1010_0001, 0xFF]),
    .decline(id: sampleTransferID, reason: "no thanks"),
    .cancel(id: sampleTransferID, reason: ""),
    .done(id: sampleTransferID, ok: true, reason: ""),
    .done(id: sampleTransferID, ok: false, reason: "root hash mismatch"),
    .resent(id: sampleTransferID, bytes: 32_700_000),
    .chunk(id: sampleTransferID, index: 0, data: []),
    .chunk(id: sampleTransferID, index: .max, data: pattern(5000)),
    .chunkAck(id: sampleTransferID, index: 7, ok: true),
    .chunkAck(id: sampleTransferID, index: 8, ok: false),
    .shareOffer(folder: "abcde-fghij", label: "Documents"),
    .shareAnswer(folder: "abcde-fghij", accepted: true, reason: ""),
    .shareAnswer(folder: "abcde-fghij", accepted: false, reason: "unshared"),
    .indexUpdate(folder: "abcde-fghij", full: true, entries: []),
    .indexUpdate(folder: "f", full: false, entries: [sampleEntry, SyncFileEntry(FileEntry(
        path: "gone", kind: .directory, mtimeNs: -1, mode: 0o755, deleted: true, version: [:], modifiedBy: "B", sequence: 2))]),
    .indexAck(folder: "abcde-fghij", sequence: .max),
    .blockRequest(request: 7, folder: "f", path: "a/b.txt", offset: 1 << 40, size: 65_536, hash: Array(repeating: 9, count: 32)),
    .blockResponse(request: 7, ok: true, data: pattern(100)),
    .blockResponse(request: 8, ok: false, data: []),
    .indexBlocks(folder: "abcde-fghij", blocks: [pattern(4096), [0]]),
    .folderSelection(folder: "abcde-fghij", paths: ["photos/2026", "docs", String(repeating: "é", count: 2048)]),
    .folderSelection(folder: "f", paths: []),
    .chunkHave(folder: "abcde-fghij", path: "big/file.bin", root: Array(repeating: 7, count: 32), count: 17, bitmap: [0xFF, 0x00, 0x01]),
    .growingFile(folder: "abcde-fghij", path: "big/file.bin", scan: .max, size: 1 << 40, offset: 1 << 30,
                 chunks: [GrowingChunk(size: 1 << 20, hash: Array(repeating: 3, count: 32)), GrowingChunk(size: 1, hash: Array(repeating: 4, count: 32))]),
    .growingFile(folder: "f", path: "a", scan: 1, size: 0, offset: 0, chunks: []),
]

let sampleEntry = SyncFileEntry(FileEntry(path: "dir/notes.txt", kind: .file, size: 1234, mtimeNs: 1_700_000_000_000_000_001,
                                          mode: 0o644, version: ["AAAA": 3, "BBBB": 1], rootHash: Array(repeating: 7, count: 32),
                                          modifiedBy: "AAAA", sequence: 42),
                                manifest: pattern(60))

let sampleTransferID = try! TransferID(Array(1...16))

let sampleOffer = TransferOffer(id: sampleTransferID, kind: .folder, name: "trip 📷", entries: [
    .init(path: "a/b.txt", size: 1234, mode: 0o644, mtimeNanoseconds: 1_700_000_000_123_456_789, manifest: pattern(40)),
    .init(path: "empty", size: 0, mode: 0o600, mtimeNanoseconds: -5, manifest: []),
])

/// `count` random valid frames (bodies up to `maxBody` bytes; folder frames from
/// `randomFolderFrame`), deterministic for a seed.
func randomFrames(_ count: Int, maxBody: Int, using rng: inout SplitMix64) -> [Frame] {
    let statuses = PairingStatus.allCases
    let codes: [CloseCode] = [.normal, .protocolError, .authFailed, .notPaired, .impersonation,
                              .timeout, .shuttingDown, .unknown(999)]
    return (0..<count).map { _ in
        switch Int.random(in: 0..<14, using: &rng) {
        case 0: return .ping(rng.next())
        case 1: return .pong(rng.next())
        case 2: return .message(id: rng.next(), body: rng.bytes(Int.random(in: 0...maxBody, using: &rng)))
        case 3: return .pairing(statuses.randomElement(using: &rng)!)
        case 4: return .close(code: codes.randomElement(using: &rng)!,
                              reason: String(repeating: "é", count: Int.random(in: 0...256, using: &rng)))
        case 5: return .streamOpen(id: UInt32.random(in: 0 ... .max, using: &rng),
                                   name: String(repeating: "s", count: Int.random(in: 1...255, using: &rng)))
        case 6: return .streamData(id: UInt32.random(in: 0 ... .max, using: &rng),
                                   bytes: rng.bytes(Int.random(in: 0...maxBody, using: &rng)))
        case 7: return .chunk(id: .random(), index: UInt32.random(in: 0 ... .max, using: &rng),
                              data: rng.bytes(Int.random(in: 0...maxBody, using: &rng)))
        case 8: return .accept(id: .random(), have: rng.bytes(Int.random(in: 0...maxBody, using: &rng)))
        case 9: return .offer(TransferOffer(id: .random(), kind: .file, name: "f", entries: [
            .init(path: String(repeating: "p", count: Int.random(in: 1...40, using: &rng)), size: rng.next(),
                  mode: UInt32.random(in: 0...0o7777, using: &rng), mtimeNanoseconds: Int64(bitPattern: rng.next()),
                  manifest: rng.bytes(Int.random(in: 0...maxBody, using: &rng)))]))
        case 10: return .streamClose(id: UInt32.random(in: 0 ... .max, using: &rng))
        case 11: return Bool.random(using: &rng)
            ? .streamCredit(id: UInt32.random(in: 0 ... .max, using: &rng), bytes: UInt32.random(in: 0 ... .max, using: &rng))
            : .streamReset(id: UInt32.random(in: 0 ... .max, using: &rng),
                           reason: String(repeating: "r", count: Int.random(in: 0...512, using: &rng)))
        default: return randomFolderFrame(using: &rng)
        }
    }
}

func encodeAll(_ frames: [Frame]) -> [UInt8] {
    var buffer: [UInt8] = []
    for frame in frames { FrameEncoder.append(frame, to: &buffer) }
    return buffer
}

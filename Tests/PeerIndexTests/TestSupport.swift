import Foundation
import PeerIndex

/// A fresh directory under the system temporary directory, removed after `body`.
func withTemporaryDirectory<T>(_ body: (URL) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("peerindex-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    return try body(dir)
}

/// A fixed clock: tests never depend on the wall time.
let fixedClock: @Sendable () -> Int64 = { 1_700_000_000_000 }

/// A syntactically valid device ID (56 characters of A–Z, 2–7), different for each `n`.
func deviceID(_ n: Int) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    return String((0..<56).map { alphabet[(n * 7 + $0 * ($0 % 5 + 1)) % 32] })
}

/// 32 bytes that differ for each `n`.
func key(_ n: Int, count: Int = 32) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: n &* 31 &+ $0) }
}

func samplePeer(_ n: Int, name: String = "peer", trust: PeerRecord.Trust = .paired) -> PeerRecord {
    PeerRecord(deviceID: deviceID(n), name: name, publicKey: key(n), trust: trust, autoAccept: n % 2 == 0,
               firstSeen: 1_000 + Int64(n), lastSeen: n % 3 == 0 ? nil : 2_000, pairedAt: trust == .paired ? 1_500 : nil,
               addresses: ["192.0.2.\(n):22000", "[2001:db8::1]:22000"])
}

func sampleTransfer(id: String, peer: Int, chunkCount: Int, chunkSize: Int64 = 1_000) -> (TransferRecord, [TransferChunk]) {
    let chunks = (0..<chunkCount).map {
        TransferChunk(index: $0, offset: Int64($0) * chunkSize, size: chunkSize, hash: key($0))
    }
    let record = TransferRecord(
        id: id, direction: .receive, deviceID: deviceID(peer), name: "report.pdf",
        size: Int64(chunkCount) * chunkSize, mode: 0o644, mtimeNs: 1_699_999_999_123_456_789,
        rootHash: key(99), chunkCount: chunkCount, state: .offered, partialPath: "/tmp/.report.pdf.partial",
        finalPath: "/home/u/Downloads/report.pdf", createdAt: 1_700_000_000_000)
    return (record, chunks)
}

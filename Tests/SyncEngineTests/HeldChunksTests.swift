import Foundation
import PeerFiles
import PeerWire
@testable import SyncEngine
import Testing

/// Fan-out's bounds (issue 43.4): what a member says it holds is kept within bounds and
/// only as a hint, and we serve only verified chunks of the files we fetch.
@Suite struct HeldChunksTests {
    static let root = [UInt8](repeating: 7, count: 32)

    /// Four chunks of `bytes` (whose hashes are right), as a manifest lists them.
    static func chunks(_ bytes: [UInt8]) -> [ChunkRef] {
        let size = bytes.count / 4
        return (0..<4).map { n in
            let part = Array(bytes[n * size..<(n + 1) * size])
            return ChunkRef(offset: UInt64(n * size), size: UInt32(size), hash: ChunkHash.of(part))
        }
    }

    @Test func aMembersAnnouncementsAreBoundedAndExpire() {
        let held = HeldChunks()
        let start = ContinuousClock.now
        // More files than a member may have kept: the oldest go.
        for n in 0..<(HeldChunks.maxPerMember + 5) {
            held.received(device: "M", path: "f\(n)", root: Self.root, count: 9, bitmap: [0x01, 0x00],
                          now: start + .milliseconds(n))
        }
        #expect(held.kept(device: "M") == (HeldChunks.maxPerMember, HeldChunks.maxPerMember * 2))
        // A bitmap of the wrong length, a root of the wrong size, a count past the wire's limit: not kept.
        let other = "N"
        #expect(!held.received(device: other, path: "a", root: Self.root, count: 9, bitmap: [0x01]))
        #expect(!held.received(device: other, path: "a", root: [1, 2], count: 9, bitmap: [0x01, 0]))
        #expect(!held.received(device: other, path: "a", root: Self.root, count: UInt32(WireLimits.maxHeldChunks) + 1,
                                bitmap: [UInt8](repeating: 1, count: WireLimits.heldBitmapSize(UInt32(WireLimits.maxHeldChunks) + 1))))
        #expect(held.kept(device: other).files == 0)
        // Holding nothing forgets the file; a newer announcement replaces the older.
        held.received(device: other, path: "a", root: Self.root, count: 9, bitmap: [0x03, 0], now: start)
        held.received(device: other, path: "a", root: Self.root, count: 9, bitmap: [0x00, 0], now: start)
        #expect(held.kept(device: other).files == 0)
        // Announcements past their lifetime go with the member's next one.
        held.received(device: "M", path: "late", root: Self.root, count: 9, bitmap: [0x01, 0], now: start + HeldChunks.lifetime + .seconds(1))
        #expect(held.kept(device: "M").files == 1)
    }

    /// A new empty directory (removed when the test ends).
    static func directory() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("held-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test func aPullerAsksOnlyMembersThatSaidTheyHoldTheChunk() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = (0..<4096).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let chunks = Self.chunks(bytes)
        let held = HeldChunks()
        held.fetching(path: "big", root: Self.root, chunks: chunks, missing: chunks, directory: try DirectoryHandle(path: dir), temp: "t")
        let now = ContinuousClock.now
        held.received(device: "B", path: "big", root: Self.root, count: 4, bitmap: [0b0101], now: now)
        held.received(device: "C", path: "big", root: Self.root, count: 4, bitmap: [0b0100], now: now)
        held.received(device: "D", path: "big", root: [UInt8](repeating: 9, count: 32), count: 4, bitmap: [0b1111], now: now)
        let all: Set = ["B", "C", "D"]
        #expect(held.holders(path: "big", root: Self.root, offset: chunks[0].offset, among: all, now: now) == ["B"])
        #expect(held.holders(path: "big", root: Self.root, offset: chunks[2].offset, among: all, now: now) == ["B", "C"])
        #expect(held.holders(path: "big", root: Self.root, offset: chunks[1].offset, among: all, now: now).isEmpty)
        #expect(held.holders(path: "big", root: Self.root, offset: chunks[2].offset, among: ["C"], now: now) == ["C"])
        #expect(held.holders(path: "big", root: Self.root, offset: 3, among: all, now: now).isEmpty)  // not a chunk's start
        #expect(held.holders(path: "big", root: Self.root, offset: chunks[2].offset, among: all, now: now + HeldChunks.lifetime).isEmpty)
    }

    @Test func onlyVerifiedChunksAreServedAndAnnouncementsAreRateBounded() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = (0..<4096).map { UInt8(truncatingIfNeeded: $0 * 13) }
        let chunks = Self.chunks(bytes)
        // The temporary file holds chunk 0 and 1 right, chunk 2 wrong (zeros), chunk 3 not yet.
        var temp = bytes
        for i in 2048..<4096 { temp[i] = 0 }
        try Data(temp).write(to: URL(fileURLWithPath: dir + "/t"))
        let held = HeldChunks()
        held.fetching(path: "big", root: Self.root, chunks: chunks, missing: Array(chunks[1...]), directory: try DirectoryHandle(path: dir), temp: "t")
        func ask(_ n: Int) -> [UInt8]? { held.bytes(path: "big", offset: chunks[n].offset, size: chunks[n].size, hash: chunks[n].hash.bytes) }
        #expect(ask(0) == Array(bytes[0..<1024]))
        #expect(ask(1) == nil, "not verified yet: never served")
        let start = ContinuousClock.now
        let first = try #require(held.verified(path: "big", offset: chunks[1].offset, now: start))
        #expect(first.bitmap == [0b0011] && first.count == 4 && first.root == Self.root)
        #expect(ask(1) == Array(bytes[1024..<2048]))
        // Marked verified, but its bytes do not hash right in the file: not served.
        #expect(held.verified(path: "big", offset: chunks[2].offset, now: start + .milliseconds(10)) == nil, "within the interval")
        #expect(ask(2) == nil)
        // Another size or hash than the chunk's is not served either.
        #expect(held.bytes(path: "big", offset: chunks[0].offset, size: 10, hash: chunks[0].hash.bytes) == nil)
        let later = try #require(held.verified(path: "big", offset: chunks[3].offset, now: start + HeldChunks.announceInterval))
        #expect(later.bitmap == [0b1111])
        #expect(held.done(paths: ["big"], placed: ["big"]).isEmpty, "placed: the index says so, nothing to withdraw")
        #expect(ask(0) == nil, "placed: nothing more from the temporary file")
    }

    /// A file whose pull ends without it being placed, or that the folder's rules drop, is
    /// withdrawn (every bit clear, the announced root and count) if it was announced, so the
    /// members stop asking for it at once; one never announced, or placed, is not.
    @Test func anAnnouncedFileThatIsNotPlacedIsWithdrawn() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let chunks = Self.chunks([UInt8](repeating: 3, count: 4096))
        let held = HeldChunks()
        for path in ["failed", "placed", "quiet", "ignored"] {
            held.fetching(path: path, root: Self.root, chunks: chunks, missing: chunks, directory: try DirectoryHandle(path: dir), temp: path)
            if path != "quiet" { #expect(held.verified(path: path, offset: chunks[1].offset) != nil) }
        }
        let dropped = held.drop { $0 == "ignored" }
        #expect(dropped == [.withdrawal(path: "ignored", root: Self.root, count: 4)] && dropped[0].bitmap == [0] && dropped[0].isWithdrawal)
        let ended = held.done(paths: ["failed", "placed", "quiet"], placed: ["placed"])
        #expect(ended == [.withdrawal(path: "failed", root: Self.root, count: 4)])
        #expect(!["failed", "placed", "quiet", "ignored"].contains(where: held.isServing))
    }

    @Test func ownFilesAreBounded() throws {
        let dir = FileManager.default.temporaryDirectory.path
        let chunks = Self.chunks([UInt8](repeating: 1, count: 64))
        let held = HeldChunks()
        let start = ContinuousClock.now
        for n in 0..<(HeldChunks.maxOwn + 3) {
            held.fetching(path: "f\(n)", root: Self.root, chunks: chunks, missing: [chunks[0]], directory: try DirectoryHandle(path: dir),
                          temp: "t", now: start + .milliseconds(n))
        }
        // The oldest three are gone: a verified chunk of theirs gives no note.
        #expect(held.verified(path: "f0", offset: chunks[0].offset) == nil)
        #expect(held.verified(path: "f\(HeldChunks.maxOwn + 2)", offset: chunks[0].offset) != nil)
        // A file of one chunk is not shared while it is fetched.
        held.fetching(path: "one", root: Self.root, chunks: [chunks[0]], missing: [chunks[0]], directory: try DirectoryHandle(path: dir), temp: "t")
        #expect(held.verified(path: "one", offset: 0) == nil)
    }

    @Test func nodesStartTheirFetchesAtDifferentPoints() {
        let chunks = Self.chunks([UInt8](repeating: 1, count: 4096)) + Self.chunks([UInt8](repeating: 2, count: 4096)).map {
            ChunkRef(offset: $0.offset + 4096, size: $0.size, hash: $0.hash)
        }
        // Four nodes connected to each other: each starts a quarter of the file further.
        let nodes: Set = ["alice", "bob", "carol", "dave"]
        let starts = nodes.sorted().map { HeldChunks.spread(chunks, device: $0, among: nodes.subtracting([$0])).first!.offset }
        #expect(starts == [chunks[0].offset, chunks[2].offset, chunks[4].offset, chunks[6].offset])
        for device in nodes { #expect(Set(HeldChunks.spread(chunks, device: device, among: nodes)) == Set(chunks)) }
    }
}

extension HeldChunksTests {
    /// A file of more chunks than we fetch with fan-out can never be one of ours: its
    /// announcement is not kept (16 of them per member were 2 MiB of bitmaps for nothing).
    @Test func announcementsOfFilesTooLargeToShareAreNotKept() {
        let held = HeldChunks()
        let count = UInt32(HeldChunks.maxOwnChunks + 1)
        for n in 0..<HeldChunks.maxPerMember {
            held.received(device: "M", path: "f\(n)", root: Self.root, count: count,
                          bitmap: [UInt8](repeating: 0xFF, count: WireLimits.heldBitmapSize(count)))
        }
        #expect(held.kept(device: "M").bytes == 0)
        let largest = UInt32(HeldChunks.maxOwnChunks)
        #expect(held.received(device: "M", path: "g", root: Self.root, count: largest,
                              bitmap: [UInt8](repeating: 1, count: WireLimits.heldBitmapSize(largest))))
    }

    /// A member that did not give a chunk it announced is not a source of that file on its
    /// word for `distrust`, however often it announces it again; other files are not affected.
    @Test func aMemberThatFailedAnAnnouncedChunkIsDistrustedForThatFile() throws {
        let chunks = Self.chunks([UInt8](repeating: 3, count: 4096))
        let held = HeldChunks()
        let dir = FileManager.default.temporaryDirectory.path
        for path in ["big", "other"] {
            held.fetching(path: path, root: Self.root, chunks: chunks, missing: chunks, directory: try DirectoryHandle(path: dir), temp: "t")
        }
        let start = ContinuousClock.now
        func holders(_ path: String, at time: ContinuousClock.Instant) -> [String] {
            held.holders(path: path, root: Self.root, offset: chunks[1].offset, among: ["B"], now: time)
        }
        for path in ["big", "other"] { held.received(device: "B", path: path, root: Self.root, count: 4, bitmap: [0x0F], now: start) }
        held.failed(device: "B", path: "big", now: start)
        #expect(holders("big", at: start).isEmpty && holders("other", at: start) == ["B"])
        let again = start + .seconds(1)
        #expect(!held.received(device: "B", path: "big", root: Self.root, count: 4, bitmap: [0x0F], now: again))
        #expect(holders("big", at: again).isEmpty)
        let later = start + HeldChunks.distrust
        #expect(held.received(device: "B", path: "big", root: Self.root, count: 4, bitmap: [0x0F], now: later))
        #expect(holders("big", at: later) == ["B"])
    }
}

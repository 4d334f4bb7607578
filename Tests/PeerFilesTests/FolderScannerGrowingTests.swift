import Foundation
import Glibc
@testable import PeerFiles
import Synchronization
import Testing

/// The scanner's word on large files while it hashes them (`FolderScanner.onGrowing`), which
/// peers fetch ahead of the index entry (issue 43.2, `growingFile`).
@Suite struct FolderScannerGrowingTests {
    /// What `onGrowing` was told, in order.
    final class Told: Sendable {
        let events = Mutex<[GrowingFileEvent]>([])
        var chunks: [ChunkRef] {
            events.withLock { events in
                events.flatMap { event -> [ChunkRef] in if case let .chunks(_, _, _, chunks) = event { chunks } else { [] } }
            }
        }
        var scans: Set<UInt64> {
            Set(events.withLock { $0.map { switch $0 { case let .chunks(_, scan, _, _), let .abandoned(_, scan): scan } } })
        }
    }

    static func scanner(_ dir: String, from: UInt64, _ told: Told) -> FolderScanner {
        var scanner = FolderScanner(root: dir)
        scanner.growingFrom = from
        scanner.onGrowing = { event in told.events.withLock { $0.append(event) } }
        return scanner
    }

    /// A 9 MiB file (told of from 1 MiB): its chunks come in batches of at least 4 MiB (the
    /// last one the rest), in order from offset 0, one scan, and they are exactly the
    /// manifest's; a small file is not told of.
    @Test func aLargeFilesChunksAreToldWhileItIsHashed() throws {
        try withTemporaryDirectory { dir in
            try writeFile(dir + "/big.bin", pseudoRandomBytes(count: 9 << 20, seed: 7))
            try Tree.write(dir + "/small.txt", "small")
            let told = Told()
            var known = KnownEntryList()
            let (result, _) = try scanAndApply(Self.scanner(dir, from: 1 << 20, told), &known)
            let manifest = try #require(result.added["big.bin"]?.manifest)
            #expect(told.chunks == manifest.chunks)
            #expect(told.scans.count == 1)
            let batches = told.events.withLock { $0.compactMap { if case let .chunks(path, _, size, chunks) = $0 { (path, size, chunks) } else { nil } } }
            #expect(batches.count >= 2 && batches.allSatisfy { $0.0 == "big.bin" && $0.1.size == 9 << 20 })
            #expect(batches.dropLast().allSatisfy { $0.2.reduce(0) { $0 + UInt64($1.size) } >= GrowingFileEvent.batchBytes })
        }
    }

    /// A file that changes while it is hashed is reported unstable, and what was told of that
    /// hashing is declared void (`abandoned`, same scan); the next scan tells a new one.
    @Test func aFileChangedWhileHashedIsAbandoned() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/busy.bin"
            try writeFile(path, pseudoRandomBytes(count: 6 << 20, seed: 9))
            let told = Told()
            var scanner = Self.scanner(dir, from: 1 << 20, told)
            scanner.afterReadHook = { _ in
                let fd = open(path, O_WRONLY | O_APPEND)
                _ = Glibc.write(fd, "more", 4)
                close(fd)
            }
            var known = KnownEntryList()
            let (result, _) = try scanAndApply(scanner, &known)
            #expect(result.unstable == ["busy.bin"])
            let last = told.events.withLock { $0.last }
            guard case let .abandoned(name, scan)? = last else { Issue.record("not abandoned: \(String(describing: last))"); return }
            #expect(name == "busy.bin" && told.scans == [scan])
            let again = Told()
            let (later, _) = try scanAndApply(Self.scanner(dir, from: 1 << 20, again), &known)
            #expect(again.chunks == later.added["busy.bin"]?.manifest?.chunks)
            #expect(again.scans.count == 1 && again.scans != told.scans)
        }
    }
}

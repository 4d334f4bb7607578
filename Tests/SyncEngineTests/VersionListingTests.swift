import PeerModel
import Dispatch
import Foundation
import Testing
import PeerIndex
import PeerWire
@testable import SyncEngine

/// Issue 41: what a member is told of our versions is paged and bounded.
struct VersionListingTests {
    static func service(_ index: NodeIndex) -> FolderService {
        FolderService(queue: DispatchQueue(label: "test.versions"), index: index, events: EventLog(), config: NodeConfig(),
                      localDevice: String(repeating: "A", count: 56))
    }

    static func version(_ path: String, _ n: Int) -> VersionRecord {
        VersionRecord(folderID: "f", path: path, version: ["A": UInt64(n)], size: 10, mtimeNs: 0, mode: 0o644, modifiedBy: "A",
                      keptAt: Int64(n), reason: "peer-edit", rootHash: [UInt8](repeating: UInt8(n % 256), count: 32), held: true,
                      chunks: [FileChunkRecord(offset: 0, size: 10, hash: [UInt8](repeating: 1, count: 32))])
    }

    /// 450 versions under a folder path: pages of 200 at most, newest first, each page
    /// after the last one's ID, and the path's neighbours ("docs-old", "docsx") never listed.
    @Test func aListingComesInBoundedPagesOfThePathOnly() throws {
        let index = try NodeIndex.inMemory()
        _ = try index.addFolder(id: "f", path: "/tmp/f")
        for n in 1...450 { try index.addVersion(Self.version("docs/file\(n % 7).txt", n)) }
        try index.addVersion(Self.version("docs-old/a.txt", 1_000))
        try index.addVersion(Self.version("docsx", 1_001))
        let service = Self.service(index)
        var before: UInt64 = 0
        var pages: [VersionPage] = []
        repeat {
            let page = try service.versionPage(folderID: "f", path: "docs", tree: true, before: before, version: 0, ignores: nil)
            try page.validate()
            #expect(page.entries.count <= FolderService.versionPage)
            #expect(page.entries.allSatisfy { $0.manifest.isEmpty && $0.path.hasPrefix("docs/") }, "\(page.entries.map(\.path))")
            pages.append(page)
            before = page.entries.last?.id ?? 0
        } while pages.last?.more == true && pages.count < 10
        #expect(pages.map(\.entries.count) == [200, 200, 50])
        let ids = pages.flatMap(\.entries).map(\.id)
        #expect(ids == ids.sorted(by: >) && Set(ids).count == 450)
        // One version with its manifest; an ID of another path gives nothing.
        let one = try service.versionPage(folderID: "f", path: "docs/file3.txt", tree: false, before: 0, version: 3, ignores: nil)
        #expect(one.entries.count == 1 && !one.entries[0].manifest.isEmpty)
        let elsewhere = try service.versionPage(folderID: "f", path: "docs/file1.txt", tree: false, before: 0, version: 3, ignores: nil)
        #expect(elsewhere.entries.isEmpty)
    }
}

/// Which version `restore` takes, from the versions listed on every device (pure logic).
struct RestorePickTests {
    static func known(_ device: String, _ id: UInt64, _ path: String, keptAt: Int64, mtimeMs: Int64, content: UInt8, held: Bool = true,
                      local: Bool = false) -> FolderService.KnownVersion {
        FolderService.KnownVersion(device: device, local: local,
                                   entry: VersionEntry(id: id, path: path, keptAt: keptAt, size: 1, mtimeNs: mtimeMs * 1_000_000,
                                                       modifiedBy: "A", reason: "peer-edit", held: held,
                                                       rootHash: [UInt8](repeating: content, count: 32)))
    }

    @Test func theNewestTheOneCurrentAtATimeOrTheOneNamed() {
        // a.txt: content 1 written at 100, replaced at 200; content 2 written at 200, replaced at 300.
        // Alice knows content 1 but does not hold it; bob and carol hold it.
        let list = [
            Self.known("ALICEXXX", 1, "a.txt", keptAt: 200, mtimeMs: 100, content: 1, held: false, local: true),
            Self.known("BOBXXXXX", 7, "a.txt", keptAt: 201, mtimeMs: 100, content: 1),
            Self.known("CAROLXXX", 3, "a.txt", keptAt: 202, mtimeMs: 100, content: 1),
            Self.known("BOBXXXXX", 8, "a.txt", keptAt: 300, mtimeMs: 200, content: 2),
            Self.known("BOBXXXXX", 9, "b.txt", keptAt: 150, mtimeMs: 50, content: 3),
        ]
        let newest = FolderService.pick(list, at: nil, version: nil)
        #expect(newest.map(\.entry.path) == ["a.txt", "b.txt"])
        #expect(newest.first?.entry.rootHash.first == 2 && newest.first?.id == "BOBXXXX-8")
        // At 150: content 1 (written at 100, replaced at 200); its holders are those that hold it.
        let at150 = FolderService.pick(list, at: 150, version: nil)
        #expect(at150.map(\.entry.path) == ["a.txt", "b.txt"])
        #expect(at150.first?.entry.rootHash.first == 1)
        #expect(at150.first?.holders.map(\.device) == ["BOBXXXXX", "CAROLXXX"], "a device that does not hold it is no source")
        // At 250: content 2; b.txt was gone already (replaced at 150).
        #expect(FolderService.pick(list, at: 250, version: nil).map { $0.entry.rootHash.first } == [2])
        // Before anything was written: nothing.
        #expect(FolderService.pick(list, at: 40, version: nil).isEmpty)
        // By ID.
        #expect(FolderService.pick(list, at: nil, version: "CAROLXX-3").first?.holders.count == 2)
        #expect(FolderService.pick(list, at: nil, version: "CAROLXX-4").isEmpty)
    }
}

/// The figure of issue 41's closing note: `history` of a folder of 100,000 files, each with a
/// version kept (`VERSIONS_MEASURE_HISTORY=100000`; off by default: it only prints times).
struct VersionHistoryFigures {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["VERSIONS_MEASURE_HISTORY"] != nil))
    func historyOfALargeFolder() throws {
        let count = Int(ProcessInfo.processInfo.environment["VERSIONS_MEASURE_HISTORY"] ?? "") ?? 100_000
        let path = NSTemporaryDirectory() + "versions-history-\(UUID().uuidString).db"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let index = try NodeIndex.open(at: path)
        _ = try index.addFolder(id: "f", path: "/tmp/f")
        let started = Date()
        for first in stride(from: 1, through: count, by: 10_000) {
            try index.addVersions((first..<min(count + 1, first + 10_000)).map { VersionListingTests.version("dir\($0 % 100)/file\($0).txt", $0) })
        }
        print("history figures: \(count) versions recorded in \(String(format: "%.1f s", Date().timeIntervalSince(started)))")
        let service = VersionListingTests.service(index)
        for (label, asked, tree) in [("the folder", "", true), ("one directory (1 % of it)", "dir7", true), ("one file", "dir7/file7.txt", false)] {
            let start = Date()
            let local = try index.versions(folderID: "f", path: asked, underPrefix: tree, limit: HistoryResult.limit + 1)
            let mid = Date()
            let page = try service.versionPage(folderID: "f", path: asked.isEmpty ? "" : asked, tree: tree, before: 0, version: 0, ignores: nil)
            print("history figures: \(label): \(local.count) listed in \(String(format: "%.1f ms", mid.timeIntervalSince(start) * 1000)), "
                  + "a peer's page of \(page.entries.count) in \(String(format: "%.1f ms", Date().timeIntervalSince(mid) * 1000))")
        }
    }
}

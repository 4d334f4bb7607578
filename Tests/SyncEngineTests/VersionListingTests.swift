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

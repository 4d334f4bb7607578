import Foundation
import Testing

/// docs/ARCHITECTURE.md states how many types in SyncEngine still carry `@unchecked Sendable`
/// (issue 42: the count goes to 0 as services come to own their state); the number it states
/// is the number in the sources, so the document cannot go stale again.
struct ArchitectureCountsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theUncheckedSendableCountInArchitectureIsTheSources() throws {
        let doc = try String(contentsOf: Self.root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let marker = "`@unchecked Sendable` in SyncEngine: "
        let line = try #require(doc.split(separator: "\n").first { $0.hasPrefix(marker) }, "ARCHITECTURE.md lost its count line")
        let stated = try #require(Int(line.dropFirst(marker.count).prefix { $0.isNumber }))
        var counted = 0
        let sources = Self.root.appendingPathComponent("Sources/SyncEngine")
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            counted += text.split(separator: "\n").filter { line in
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                return code.contains("@unchecked Sendable")
            }.count
        }
        #expect(stated == counted, "ARCHITECTURE.md says \(stated), Sources/SyncEngine has \(counted)")
    }
}

import Foundation
import Testing

/// Issue 42.4: a package that depends on syncpeer sees only the `Syncpeer` module. The inner
/// modules declare `package`, never `public` (a `public` there would be API nobody promised),
/// and Package.swift offers no other library product.
struct PackageAccessTests {
    static let root = ArchitectureCountsTests.root
    static let inner = ["SyncEngine", "PeerNet", "PeerIndex", "PeerFiles", "PeerWire", "PeerCrypto", "Wormhole", "SyncpeerWeb", "SyncpeerCLI"]

    @Test func innerModulesDeclareNothingPublic() throws {
        var found: [String] = []
        for module in Self.inner {
            let directory = Self.root.appendingPathComponent("Sources/\(module)")
            let files = try #require(FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil))
            for case let file as URL in files where file.pathExtension == "swift" {
                for (n, line) in try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let code = line.drop { $0 == " " }
                    if code.hasPrefix("//") { continue }
                    if code.range(of: #"^(@\w+(\([^)]*\))?\s+)*((static|final|override|convenience|required|nonisolated|mutating|indirect|lazy|dynamic|class)\s+)*public\s"#,
                                  options: .regularExpression) != nil {
                        found.append("\(module)/\(file.lastPathComponent):\(n + 1)")
                    }
                }
            }
        }
        #expect(found.isEmpty, "public declarations in inner modules: \(found.prefix(20))")
    }

    @Test func theOnlyLibraryProductIsSyncpeer() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let libraries = manifest.split(separator: "\n").filter { $0.contains(".library(") }
        #expect(libraries.count == 1 && libraries[0].contains("name: \"Syncpeer\""), "\(libraries)")
    }
}

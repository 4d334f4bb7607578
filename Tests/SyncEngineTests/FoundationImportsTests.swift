import Foundation
import Testing

/// Issue 42.6: the release binary is mostly Foundation's. A module that imports Foundation (not
/// FoundationEssentials) links swift-corelibs-foundation, CoreFoundation,
/// FoundationInternationalization and ICU with its 34 MB of data: 42 of the 65 MB that
/// `make install` installs. Only when no module linked into `syncpeer` imports Foundation does
/// that go, and none does: what FoundationEssentials lacks has a plain Swift form (`OSThread`,
/// `OSCondition`, `JSONValue.object(parsing:)`, `PlainFile`, `PlainText`, `PathName`,
/// `UnicodeForms`; EndToEndTests' BinaryLinksTests checks the binary itself).
struct FoundationImportsTests {
    /// How many files of each module linked into `syncpeer` may import Foundation: none.
    static let ceiling = [
        "syncpeer": 0, "SyncpeerCLI": 0, "SyncpeerWeb": 0, "Wormhole": 0, "SyncEngine": 0,
        "PeerNet": 0, "PeerIndex": 0, "PeerFiles": 0, "PeerWire": 0, "PeerCrypto": 0,
    ]

    static func filesImportingFoundation(in module: String) throws -> [String] {
        let directory = ArchitectureCountsTests.root.appendingPathComponent("Sources/\(module)")
        let files = try #require(FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil))
        var found: [String] = []
        for case let file as URL in files where file.pathExtension == "swift" {
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
            let imports = lines.contains { line in
                let words = line.split(separator: " ")
                return words.last == "Foundation" && words.dropLast().last == "import"
            }
            if imports { found.append(file.lastPathComponent) }
        }
        return found.sorted()
    }

    @Test func modulesLinkedIntoTheBinaryImportFoundationOnlyWhereTheyStillNeedIt() throws {
        for (module, limit) in Self.ceiling.sorted(by: { $0.key < $1.key }) {
            let files = try Self.filesImportingFoundation(in: module)
            #expect(files.count <= limit, "\(module): \(files.count) files import Foundation (at most \(limit); use FoundationEssentials): \(files)")
        }
    }
}

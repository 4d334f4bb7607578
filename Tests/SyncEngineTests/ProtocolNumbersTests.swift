import Foundation
@testable import PeerFiles
import PeerNet
import PeerWire
@testable import SyncEngine
import Testing

/// docs/PROTOCOL.md's "Numbers an implementation needs" (issue 42.7: an independent peer
/// had to find them by experiment) equal the code's: the Hello version, FastCDC's gear
/// table, masks and chunk sizes per file size, the accept bitmap, chunk numbering, offer
/// entry paths, and every frame type's body sizes.
struct ProtocolNumbersTests {
    static let document: String = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/PROTOCOL.md")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    static var section: String {
        document.components(separatedBy: "## Numbers an implementation needs").dropFirst().first?
            .components(separatedBy: "\n## ").first ?? ""
    }

    /// The `name = value` lines of the section's block.
    static var constants: [String: String] {
        var out: [String: String] = [:]
        for line in section.split(separator: "\n") where line.contains(" = ") {
            let parts = line.split(separator: "=", maxSplits: 1)
            let value = parts[1].trimmingCharacters(in: .whitespaces)
            out[parts[0].trimmingCharacters(in: .whitespaces)] = value.components(separatedBy: "  ").first
        }
        return out
    }

    /// The rows of the section's table whose header starts with `header`.
    static func rows(after header: String) -> [[String]] {
        guard let table = section.components(separatedBy: header).dropFirst().first else { return [] }
        return table.split(separator: "\n").dropFirst(1).prefix { $0.hasPrefix("|") }.filter { !$0.hasPrefix("|---") }
            .map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    @Test func theHelloVersionIsTheOneTheCodeSpeaks() throws {
        #expect(Self.constants["hello.version"] == "\(Hello.currentProtocolVersion)")
        #expect(SecureChannel.protocolVersion == Hello.currentProtocolVersion)
        // The Hello layout and the handshake say the same.
        #expect(Self.document.contains("protocol version  u16            (\(Hello.currentProtocolVersion);"))
        #expect(Self.document.contains("prologue \"syncpeer/\(Hello.currentProtocolVersion)\""))
    }

    @Test func fastCDCParametersAreTheCodes() throws {
        let c = Self.constants
        #expect(c["chunk.targetCount"] == "\(ChunkParameters.targetChunkCount)")
        #expect(c["chunk.smallestAverage"] == "\(ChunkParameters.smallestAverage)")
        #expect(c["chunk.largestAverage"] == "\(ChunkParameters.largestAverage)")
        #expect(c["gear.seed"] == "syncpeer-fastcdc-gear-v1" && c["gear.seed"]?.utf8.count == 24)
        for i in [0, 1, 255] {
            #expect(c["gear[\(i)]"] == Self.hex(Chunker.gearTable[i]), "gear[\(i)]")
        }
        let average = ChunkParameters.forFileSize(0)
        #expect(average.averageSize == 65536)
        #expect(c["mask.strict(65536)"] == Self.hex(average.strictMask))
        #expect(c["mask.loose(65536)"] == Self.hex(average.looseMask))
    }

    @Test func chunkSizesPerFileSizeAreTheCodes() throws {
        let rows = Self.rows(after: "| file size (bytes) |")
        #expect(rows.count >= 5)
        for row in rows {
            let size = try #require(UInt64(row[0]))
            let p = ChunkParameters.forFileSize(size)
            #expect([p.minSize, p.averageSize, p.maxSize].map(String.init) == Array(row[1...3]), "file size \(size)")
        }
    }

    @Test func theAcceptBitmapIsLeastSignificantBitFirst() throws {
        let documented = try #require(Self.constants["bitmap({0,3,9} of 10)"])
        let bytes = documented.split(separator: " ").compactMap { UInt8($0, radix: 16) }
        #expect(ChunkBitmap.encode([0, 3, 9], count: 10) == bytes)
        #expect(ChunkBitmap.decode(bytes, count: 10) == [0, 3, 9])
        #expect(ChunkBitmap.decode(bytes + [0], count: 10) == nil, "any other length is malformed")
    }

    /// A folder offer: entry paths relative to the folder, `/`-separated, sorted, without the
    /// folder's name; chunks numbered across the entries in the offer's order.
    @Test func folderOffersNameEntriesAndNumberChunksAsDocumented() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("protocol-numbers-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/album"
        try FileManager.default.createDirectory(atPath: folder + "/sub/empty", withIntermediateDirectories: true)
        try TransferPair.randomFile(folder + "/sub/b.bin", size: 700 << 10, seed: 1)
        try TransferPair.randomFile(folder + "/c.bin", size: 300 << 10, seed: 2)
        try TransferPair.randomFile(folder + "/a.bin", size: 500 << 10, seed: 3)
        #expect(symlink("a.bin", folder + "/link") == 0)
        let prepared = try PreparedOffer.build(path: folder, name: nil, kind: .folder)
        #expect(prepared.offer.name == "album")
        #expect(prepared.offer.entries.map(\.path) == ["a.bin", "c.bin", "sub/b.bin"])
        let layout = prepared.layout
        let counts = layout.manifests.map(\.chunks.count)
        #expect(counts.allSatisfy { $0 > 1 })
        #expect(layout.firstChunk == [0, counts[0], counts[0] + counts[1]])
        let first = try #require(layout.locate(counts[0]))
        #expect(first.entry == 1 && first.chunk.offset == 0, "chunk \(counts[0]) is the second entry's first")

        let file = try PreparedOffer.build(path: folder + "/c.bin", name: nil, kind: .file)
        #expect(file.offer.entries.map(\.path) == [file.offer.name])
    }

    @Test func everyFrameTypesBodySizesAreTheCodes() throws {
        let rows = Self.rows(after: "| code | frame | min | max |")
        var listed: Set<FrameType> = []
        for row in rows {
            let type = try #require(UInt8(row[0].dropFirst(2), radix: 16).flatMap(FrameType.init(rawValue:)), "\(row)")
            listed.insert(type)
            let range = WireLimits.bodyLengthRange(of: type)
            #expect(row[1] == Self.name(type), "\(row)")
            #expect(row[2] == "\(range.lowerBound)" && row[3] == "\(range.upperBound)", "\(type): \(range)")
        }
        #expect(listed == Set(FrameType.allCases), "not listed: \(Set(FrameType.allCases).subtracting(listed))")
    }

    /// The frame's name as the document's tables write it (the Swift case name).
    static func name(_ type: FrameType) -> String { "\(type)".split(separator: "-").enumerated()
        .map { $0.offset == 0 ? String($0.element) : $0.element.capitalized }.joined() }

    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 16 - digits.count) + digits
    }
}

import PeerModel
@testable import PeerWire
import Testing

/// An index entry decodes into the file model (PeerModel's `FileEntry`): what a hostile or
/// careless sender may vary on the wire arrives in the one form the engine works on.
@Suite struct IndexEntryModelTests {
    /// The bytes of one entry as `SyncFileEntry.write` lays them out, with any field values.
    func entryBytes(kind: UInt8, size: UInt64, deleted: Bool, target: String, version: [(String, UInt64)],
                    sequence: UInt64, rootHash: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        writer.prefixedText("a/b", .u16)
        writer.u8(kind)
        writer.u64(size)
        writer.u64(UInt64(bitPattern: -7))
        writer.u32(0o644)
        writer.u8(deleted ? 1 : 0)
        writer.prefixedText(target, .u16)
        writer.u16(UInt16(version.count))
        for (device, counter) in version {
            writer.prefixedText(device, .u8)
            writer.u64(counter)
        }
        writer.u64(sequence)
        writer.prefixedText("M", .u8)
        writer.prefixedBytes(rootHash, .u8)
        writer.prefixedBytes([], .u32)
        return writer.bytes
    }

    func decode(_ bytes: [UInt8]) throws -> FileEntry {
        var reader = ByteReader(bytes)
        return try SyncFileEntry.read(from: &reader).entry
    }

    @Test func aNonCanonicalEntryArrivesInTheModelsForm() throws {
        let hash = [UInt8](repeating: 9, count: 32)
        // Devices out of order, one twice, a zero counter; a link target on a directory; sizes
        // and sequences past Int64.max.
        let odd = try decode(entryBytes(kind: 1, size: .max, deleted: false, target: "elsewhere",
                                        version: [("B", 2), ("A", 1), ("B", 5), ("C", 0)], sequence: .max, rootHash: []))
        #expect(odd.kind == .directory)
        #expect(odd.version == ["A": 1, "B": 5], "highest counter of a device listed twice; zeros dropped")
        #expect(odd.symlinkTarget == nil, "only a live link has a target")
        #expect(odd.size == .max && odd.sequence == .max, "clamped, never negative")
        #expect(odd.rootHash == nil && odd.mtimeNs == -7)

        let link = try decode(entryBytes(kind: 2, size: 0, deleted: false, target: "", version: [], sequence: 1, rootHash: []))
        #expect(link.kind == .symlink && link.symlinkTarget == "", "an empty target of a live link stays empty")
        let goneLink = try decode(entryBytes(kind: 2, size: 0, deleted: true, target: "x", version: [], sequence: 1, rootHash: []))
        #expect(goneLink.symlinkTarget == nil)
        let file = try decode(entryBytes(kind: 0, size: 3, deleted: false, target: "", version: [("A", 1)], sequence: 4,
                                         rootHash: hash))
        #expect(file.rootHash == hash && file.symlinkTarget == nil && file.size == 3 && file.sequence == 4)
        #expect(throws: WireError.self) {
            try decode(entryBytes(kind: 3, size: 0, deleted: false, target: "", version: [], sequence: 1, rootHash: []))
        }
    }

    @Test func theModelsFormEncodesCanonically() throws {
        let entry = FileEntry(path: "a/b", kind: .file, size: 3, mtimeNs: -7, mode: 0o644,
                              version: ["B": 5, "A": 1], rootHash: [UInt8](repeating: 9, count: 32), modifiedBy: "M", sequence: 4)
        var writer = ByteWriter()
        SyncFileEntry(entry).write(to: &writer)
        #expect(writer.bytes == entryBytes(kind: 0, size: 3, deleted: false, target: "", version: [("A", 1), ("B", 5)],
                                           sequence: 4, rootHash: [UInt8](repeating: 9, count: 32)))
        #expect(SyncFileEntry(entry).encodedSize == writer.bytes.count)
        var tombstone = entry
        (tombstone.deleted, tombstone.size) = (true, 0)
        var written = ByteWriter()
        SyncFileEntry(tombstone).write(to: &written)
        #expect(written.bytes == entryBytes(kind: 0, size: 0, deleted: true, target: "", version: [("A", 1), ("B", 5)],
                                            sequence: 4, rootHash: []), "a tombstone sends no root hash")
    }
}

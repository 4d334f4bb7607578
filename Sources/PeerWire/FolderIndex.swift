package import PeerModel

/// One file's state in a shared folder's index, as peers exchange it (`indexUpdate` frames):
/// the entry (its sequence is the sender's) plus the encoded manifest. The entry's fields
/// read as the wire entry's own (`wire.path`). On the wire a missing link target and root
/// hash are empty, sizes and sequences unsigned, the version a list sorted by device key.
@dynamicMemberLookup
package struct SyncFileEntry: Equatable, Sendable {
    package var entry: FileEntry
    /// The encoded manifest (PeerFiles), empty for non-files and tombstones.
    package var manifest: [UInt8]

    package init(_ entry: FileEntry, manifest: [UInt8] = []) {
        self.entry = entry
        self.manifest = manifest
    }

    /// The entry's fields read and write as the record's own (`record.path`). Here, not in
    /// a protocol extension of PeerModel: that would make every file that reads a field
    /// import PeerModel (MemberImportVisibility).
    @inlinable
    package subscript<Value>(dynamicMember field: WritableKeyPath<FileEntry, Value>) -> Value {
        get { entry[keyPath: field] }
        set { entry[keyPath: field] = newValue }
    }

    /// The root hash as sent: none for tombstones.
    private var wireRootHash: [UInt8] { entry.deleted ? [] : (entry.rootHash ?? []) }

    func validate() throws(WireError) {
        try TextRule.entryPath.check(entry.path, "file path")
        try TextRule.symlinkTarget.check(entry.symlinkTarget ?? "", "symlink target")
        try TextRule.deviceKey.check(entry.modifiedBy, "modified by")
        guard entry.mode <= 0o7777 else { throw .invalidValue(field: "file mode", value: UInt64(entry.mode)) }
        let version = entry.version.counters
        guard version.count <= WireLimits.maxVersionEntries else {
            throw .tooManyEntries(field: "version vector", count: version.count, limit: WireLimits.maxVersionEntries)
        }
        for device in version.keys { try TextRule.deviceKey.check(device, "version device") }
        let rootHash = wireRootHash
        guard rootHash.isEmpty || rootHash.count == 32 else {
            throw .invalidValue(field: "root hash length", value: UInt64(rootHash.count))
        }
        guard manifest.count <= WireLimits.maxManifest else {
            throw .fieldTooLong(field: "manifest", length: manifest.count, limit: WireLimits.maxManifest)
        }
    }

    /// Bytes this entry takes in an `indexUpdate` frame (exactly what `write` writes): what
    /// a sender pages by, so that a page of entries with large manifests stays one frame.
    package var encodedSize: Int {
        var size = 2 + entry.path.utf8.count + 1 + 8 + 8 + 4 + 1 + 2 + (entry.symlinkTarget?.utf8.count ?? 0) + 2
        for device in entry.version.counters.keys { size += 1 + device.utf8.count + 8 }
        return size + 8 + 1 + entry.modifiedBy.utf8.count + 1 + wireRootHash.count + 4 + manifest.count
    }

    func write(to writer: inout ByteWriter) {
        writer.prefixedText(entry.path, .u16)
        writer.u8(entry.kind.wireCode)
        writer.u64(UInt64(max(0, entry.size)))
        writer.u64(UInt64(bitPattern: entry.mtimeNs))
        writer.u32(entry.mode & 0o7777)
        writer.u8(entry.deleted ? 1 : 0)
        writer.prefixedText(entry.symlinkTarget ?? "", .u16)
        let version = entry.version.counters
        writer.u16(UInt16(version.count))
        for device in version.keys.sorted() {
            writer.prefixedText(device, .u8)
            writer.u64(version[device] ?? 0)
        }
        writer.u64(UInt64(max(0, entry.sequence)))
        writer.prefixedText(entry.modifiedBy, .u8)
        writer.prefixedBytes(wireRootHash, .u8)
        writer.prefixedBytes(manifest, .u32)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> SyncFileEntry {
        let path = try reader.prefixedText(.u16, rule: .entryPath, "file path")
        let rawKind = try reader.u8("file kind")
        guard let kind = FileKind(wireCode: rawKind) else { throw .invalidValue(field: "file kind", value: UInt64(rawKind)) }
        let size = try reader.u64("file size")
        let mtime = Int64(bitPattern: try reader.u64("file mtime"))
        let mode = try reader.u32("file mode")
        guard mode <= 0o7777 else { throw .invalidValue(field: "file mode", value: UInt64(mode)) }
        let deleted = try reader.flag("deleted flag")
        let target = try reader.prefixedText(.u16, rule: .symlinkTarget, "symlink target")
        let count = Int(try reader.u16("version vector length"))
        guard count <= WireLimits.maxVersionEntries else {
            throw .tooManyEntries(field: "version vector", count: count, limit: WireLimits.maxVersionEntries)
        }
        var version: [String: UInt64] = [:]
        version.reserveCapacity(count)
        for _ in 0..<count {
            let device = try reader.prefixedText(.u8, rule: .deviceKey, "version device")
            let counter = try reader.u64("version counter")
            // A device listed twice (hostile) counts with its highest counter.
            version[device] = max(version[device] ?? 0, counter)
        }
        let sequence = try reader.u64("file sequence")
        let modifiedBy = try reader.prefixedText(.u8, rule: .deviceKey, "modified by")
        let rootHash = try reader.prefixedBytes(.u8, limit: 32, "root hash")
        guard rootHash.isEmpty || rootHash.count == 32 else {
            throw .invalidValue(field: "root hash length", value: UInt64(rootHash.count))
        }
        let manifest = try reader.prefixedBytes(.u32, limit: WireLimits.maxManifest, "manifest")
        let entry = FileEntry(path: path, kind: kind, size: Int64(clamping: size), mtimeNs: mtime, mode: mode,
                              deleted: deleted, symlinkTarget: kind == .symlink && !deleted ? target : nil,
                              version: VersionVector(version), rootHash: rootHash.isEmpty ? nil : rootHash,
                              modifiedBy: modifiedBy, sequence: Int64(clamping: sequence))
        return SyncFileEntry(entry, manifest: manifest)
    }
}

extension FileKind {
    /// The kind's code in an `indexUpdate` entry.
    var wireCode: UInt8 {
        switch self {
        case .file: 0
        case .directory: 1
        case .symlink: 2
        }
    }

    init?(wireCode: UInt8) {
        switch wireCode {
        case 0: self = .file
        case 1: self = .directory
        case 2: self = .symlink
        default: return nil
        }
    }
}

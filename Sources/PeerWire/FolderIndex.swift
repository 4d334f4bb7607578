/// One file's state in a shared folder's index, as peers exchange it (`indexUpdate` frames).
package struct SyncFileEntry: Equatable, Sendable {
    package enum Kind: UInt8, Sendable {
        case file = 0
        case directory = 1
        case symlink = 2
    }

    /// Path relative to the folder root, `/`-separated (validated as hostile input on receipt).
    package var path: String
    package var kind: Kind
    package var size: UInt64
    package var mtimeNanoseconds: Int64
    /// Permission bits (0o7777 at most).
    package var mode: UInt32
    /// A tombstone: the path was deleted.
    package var deleted: Bool
    /// Target of a symlink ("" for other kinds).
    package var symlinkTarget: String
    /// Version vector: device key → counter, sorted by key.
    package var version: [VersionEntry]
    /// The sender's local sequence number of this change.
    package var sequence: UInt64
    /// Device key of the last change.
    package var modifiedBy: String
    /// Root hash of the content (32 bytes), empty for non-files and tombstones.
    package var rootHash: [UInt8]
    /// The encoded manifest (PeerFiles), empty for non-files and tombstones.
    package var manifest: [UInt8]

    package struct VersionEntry: Equatable, Sendable {
        package var device: String
        package var counter: UInt64
        package init(device: String, counter: UInt64) {
            self.device = device
            self.counter = counter
        }
    }

    package init(path: String, kind: Kind, size: UInt64, mtimeNanoseconds: Int64, mode: UInt32, deleted: Bool,
                symlinkTarget: String, version: [VersionEntry], sequence: UInt64, modifiedBy: String,
                rootHash: [UInt8], manifest: [UInt8]) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtimeNanoseconds = mtimeNanoseconds
        self.mode = mode
        self.deleted = deleted
        self.symlinkTarget = symlinkTarget
        self.version = version
        self.sequence = sequence
        self.modifiedBy = modifiedBy
        self.rootHash = rootHash
        self.manifest = manifest
    }

    func validate() throws(WireError) {
        try TextRule.entryPath.check(path, "file path")
        try TextRule.symlinkTarget.check(symlinkTarget, "symlink target")
        try TextRule.deviceKey.check(modifiedBy, "modified by")
        guard mode <= 0o7777 else { throw .invalidValue(field: "file mode", value: UInt64(mode)) }
        guard version.count <= WireLimits.maxVersionEntries else {
            throw .tooManyEntries(field: "version vector", count: version.count, limit: WireLimits.maxVersionEntries)
        }
        for entry in version { try TextRule.deviceKey.check(entry.device, "version device") }
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
        var size = 2 + path.utf8.count + 1 + 8 + 8 + 4 + 1 + 2 + symlinkTarget.utf8.count + 2
        for entry in version { size += 1 + entry.device.utf8.count + 8 }
        return size + 8 + 1 + modifiedBy.utf8.count + 1 + rootHash.count + 4 + manifest.count
    }

    func write(to writer: inout ByteWriter) {
        writer.prefixedText(path, .u16)
        writer.u8(kind.rawValue)
        writer.u64(size)
        writer.u64(UInt64(bitPattern: mtimeNanoseconds))
        writer.u32(mode)
        writer.u8(deleted ? 1 : 0)
        writer.prefixedText(symlinkTarget, .u16)
        writer.u16(UInt16(version.count))
        for entry in version {
            writer.prefixedText(entry.device, .u8)
            writer.u64(entry.counter)
        }
        writer.u64(sequence)
        writer.prefixedText(modifiedBy, .u8)
        writer.prefixedBytes(rootHash, .u8)
        writer.prefixedBytes(manifest, .u32)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> SyncFileEntry {
        let path = try reader.prefixedText(.u16, rule: .entryPath, "file path")
        let rawKind = try reader.u8("file kind")
        guard let kind = Kind(rawValue: rawKind) else { throw .invalidValue(field: "file kind", value: UInt64(rawKind)) }
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
        var version: [VersionEntry] = []
        for _ in 0..<count {
            let device = try reader.prefixedText(.u8, rule: .deviceKey, "version device")
            version.append(VersionEntry(device: device, counter: try reader.u64("version counter")))
        }
        let sequence = try reader.u64("file sequence")
        let modifiedBy = try reader.prefixedText(.u8, rule: .deviceKey, "modified by")
        let rootHash = try reader.prefixedBytes(.u8, limit: 32, "root hash")
        guard rootHash.isEmpty || rootHash.count == 32 else {
            throw .invalidValue(field: "root hash length", value: UInt64(rootHash.count))
        }
        let manifest = try reader.prefixedBytes(.u32, limit: WireLimits.maxManifest, "manifest")
        return SyncFileEntry(path: path, kind: kind, size: size, mtimeNanoseconds: mtime, mode: mode, deleted: deleted,
                             symlinkTarget: target, version: version, sequence: sequence, modifiedBy: modifiedBy,
                             rootHash: rootHash, manifest: manifest)
    }
}

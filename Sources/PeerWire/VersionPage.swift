/// One kept version of a file, as a ``Frame/versionResponse(request:ok:data:)`` lists it.
package struct VersionEntry: Sendable, Equatable {
    /// The holder's ID of the version (what a version request with `version` names).
    package var id: UInt64
    /// Path relative to the folder root.
    package var path: String
    /// When it was replaced and kept (unix ms).
    package var keptAt: Int64
    package var size: UInt64
    package var mtimeNs: Int64
    /// Device ID (or its compact form) that wrote this content.
    package var modifiedBy: String
    /// What replaced it (`peer-edit`, `local-delete`, …).
    package var reason: String
    /// Whether the sender holds every chunk (and serves them).
    package var held: Bool
    /// Root hash of the content (32 bytes).
    package var rootHash: [UInt8]
    /// The encoded manifest (`PeerFiles.Manifest`): only in the answer to a request for one
    /// version; empty in a listing.
    package var manifest: [UInt8]

    package init(id: UInt64, path: String, keptAt: Int64, size: UInt64, mtimeNs: Int64, modifiedBy: String, reason: String,
                held: Bool, rootHash: [UInt8], manifest: [UInt8] = []) {
        (self.id, self.path, self.keptAt, self.size, self.mtimeNs) = (id, path, keptAt, size, mtimeNs)
        (self.modifiedBy, self.reason, self.held, self.rootHash, self.manifest) = (modifiedBy, reason, held, rootHash, manifest)
    }
}

/// The body of a ``Frame/versionResponse(request:ok:data:)``: a page of versions, newest
/// first, and whether more follow (ask again with `before` = the last entry's ID).
///
///     more u8 ‖ count u16 ‖ count × ( id u64 ‖ path (u16 len) ‖ keptAt u64 ‖ size u64
///       ‖ mtimeNs u64 ‖ modifiedBy (u8 len) ‖ reason (u8 len) ‖ held u8 ‖ root 32 B ‖ manifest (u32 len) )
///
/// At most ``WireLimits/maxVersionPage`` entries; the decoder checks every length before it
/// allocates.
package struct VersionPage: Sendable, Equatable {
    package var entries: [VersionEntry]
    package var more: Bool

    package init(entries: [VersionEntry], more: Bool) {
        self.entries = entries
        self.more = more
    }

    static let reason = TextRule(maxBytes: 32)

    package func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(more ? 1 : 0)
        writer.u16(UInt16(entries.count))
        for entry in entries {
            writer.u64(entry.id)
            writer.prefixedText(entry.path, .u16)
            writer.u64(UInt64(bitPattern: entry.keptAt))
            writer.u64(entry.size)
            writer.u64(UInt64(bitPattern: entry.mtimeNs))
            writer.prefixedText(entry.modifiedBy, .u8)
            writer.prefixedText(entry.reason, .u8)
            writer.u8(entry.held ? 1 : 0)
            writer.raw(entry.rootHash)
            writer.prefixedBytes(entry.manifest, .u32)
        }
        return writer.bytes
    }

    /// Throws unless every field is within its limit.
    package func validate() throws(WireError) {
        guard entries.count <= WireLimits.maxVersionPage else {
            throw .tooManyEntries(field: "versions", count: entries.count, limit: WireLimits.maxVersionPage)
        }
        for entry in entries {
            try TextRule.entryPath.check(entry.path, "version path")
            try TextRule.deviceKey.check(entry.modifiedBy, "version author")
            try Self.reason.check(entry.reason, "version reason")
            guard entry.rootHash.count == 32 else { throw .invalidValue(field: "version root hash length", value: UInt64(entry.rootHash.count)) }
            guard entry.manifest.count <= WireLimits.maxManifest else {
                throw .fieldTooLong(field: "version manifest", length: entry.manifest.count, limit: WireLimits.maxManifest)
            }
        }
    }

    package static func decode(_ bytes: [UInt8]) throws(WireError) -> VersionPage {
        var reader = ByteReader(bytes)
        let more = try reader.flag("more versions flag")
        let count = Int(try reader.u16("version count"))
        guard count <= WireLimits.maxVersionPage else {
            throw .tooManyEntries(field: "versions", count: count, limit: WireLimits.maxVersionPage)
        }
        // Each entry takes at least 79 bytes: refuse counts the body cannot hold.
        guard count * 79 <= reader.remaining else { throw .truncated(field: "versions") }
        var entries: [VersionEntry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let id = try reader.u64("version id")
            let path = try reader.prefixedText(.u16, rule: .entryPath, "version path")
            let keptAt = Int64(bitPattern: try reader.u64("version kept at"))
            let size = try reader.u64("version size")
            let mtime = Int64(bitPattern: try reader.u64("version mtime"))
            let author = try reader.prefixedText(.u8, rule: .deviceKey, "version author")
            let reason = try reader.prefixedText(.u8, rule: Self.reason, "version reason")
            let held = try reader.flag("version held flag")
            let root = try reader.bytes(32, "version root hash")
            let manifest = try reader.prefixedBytes(.u32, limit: WireLimits.maxManifest, "version manifest")
            entries.append(VersionEntry(id: id, path: path, keptAt: keptAt, size: size, mtimeNs: mtime, modifiedBy: author,
                                        reason: reason, held: held, rootHash: root, manifest: manifest))
        }
        try reader.expectEnd(after: "version page")
        return VersionPage(entries: entries, more: more)
    }
}

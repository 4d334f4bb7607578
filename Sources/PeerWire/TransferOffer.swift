/// A 16-byte identifier of one transfer, chosen at random by the sender.
package struct TransferID: Hashable, Sendable, CustomStringConvertible {
    package static let byteCount = 16
    package let bytes: [UInt8]

    package init(_ bytes: [UInt8]) throws(WireError) {
        guard bytes.count == Self.byteCount else {
            throw .invalidValue(field: "transfer id length", value: UInt64(bytes.count))
        }
        self.bytes = bytes
    }

    /// A new random ID (SystemRandomNumberGenerator reads the kernel's CSPRNG on Linux).
    package static func random() -> TransferID {
        var generator = SystemRandomNumberGenerator()
        return try! TransferID((0..<byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Parses the 32-hex-digit form (either case).
    package init?(hex text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count == Self.byteCount * 2 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: utf8.count, by: 2) {
            guard let hi = Self.nibble(utf8[i]), let lo = Self.nibble(utf8[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        bytes = out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 97...102: c - 87
        case 65...70: c - 55
        default: nil
        }
    }

    /// 32 lower-case hex digits.
    package var description: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// What a sender offers: one file, a folder (a tree of files) or a stream spooled to a file.
/// Each entry carries its manifest (chunk sizes and hashes, encoded by PeerFiles), so the
/// receiver can verify every chunk and say which ones it already holds.
package struct TransferOffer: Equatable, Sendable {
    package enum Kind: UInt8, Sendable {
        case file = 0
        case folder = 1
        case stream = 2
    }

    /// One file of the offer.
    package struct Entry: Equatable, Sendable {
        /// Relative path with `/` separators (the receiver validates it as hostile input).
        package var path: String
        package var size: UInt64
        /// Permission bits (0o7777 at most).
        package var mode: UInt32
        /// Modification time, nanoseconds since 1970.
        package var mtimeNanoseconds: Int64
        /// The encoded manifest (see PeerFiles.Manifest).
        package var manifest: [UInt8]

        package init(path: String, size: UInt64, mode: UInt32, mtimeNanoseconds: Int64, manifest: [UInt8]) {
            self.path = path
            self.size = size
            self.mode = mode
            self.mtimeNanoseconds = mtimeNanoseconds
            self.manifest = manifest
        }
    }

    package var id: TransferID
    package var kind: Kind
    /// What people see: the file or folder name (1–255 bytes).
    package var name: String
    package var entries: [Entry]

    package init(id: TransferID, kind: Kind, name: String, entries: [Entry]) {
        self.id = id
        self.kind = kind
        self.name = name
        self.entries = entries
    }

    /// The sum of the entries' sizes.
    package var totalSize: UInt64 { entries.reduce(0) { $0 &+ $1.size } }

    func validate() throws(WireError) {
        try TextRule.offerName.check(name, "offer name")
        guard entries.count <= WireLimits.maxOfferEntries else {
            throw .tooManyEntries(field: "offer entries", count: entries.count, limit: WireLimits.maxOfferEntries)
        }
        if kind != .folder && entries.count != 1 {
            throw .invalidValue(field: "entries of a single-file offer", value: UInt64(entries.count))
        }
        for entry in entries {
            try TextRule.entryPath.check(entry.path, "entry path")
            guard entry.mode <= 0o7777 else { throw .invalidValue(field: "entry mode", value: UInt64(entry.mode)) }
            guard entry.manifest.count <= WireLimits.maxManifest else {
                throw .fieldTooLong(field: "manifest", length: entry.manifest.count, limit: WireLimits.maxManifest)
            }
        }
    }

    func write(to writer: inout ByteWriter) {
        writer.raw(id.bytes)
        writer.u8(kind.rawValue)
        writer.prefixedText(name, .u8)
        writer.u32(UInt32(entries.count))
        for entry in entries {
            writer.prefixedText(entry.path, .u16)
            writer.u64(entry.size)
            writer.u32(entry.mode)
            writer.u64(UInt64(bitPattern: entry.mtimeNanoseconds))
            writer.prefixedBytes(entry.manifest, .u32)
        }
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> TransferOffer {
        let id = try TransferID(try reader.bytes(TransferID.byteCount, "transfer id"))
        let rawKind = try reader.u8("offer kind")
        guard let kind = Kind(rawValue: rawKind) else { throw .invalidValue(field: "offer kind", value: UInt64(rawKind)) }
        let name = try reader.prefixedText(.u8, rule: .offerName, "offer name")
        let count = Int(try reader.u32("offer entry count"))
        guard count <= WireLimits.maxOfferEntries else {
            throw .tooManyEntries(field: "offer entries", count: count, limit: WireLimits.maxOfferEntries)
        }
        // Each entry takes at least 2 + 8 + 4 + 8 + 4 bytes: refuse counts the body cannot hold
        // before reserving anything.
        guard count * 26 <= reader.remaining else { throw .truncated(field: "offer entries") }
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let path = try reader.prefixedText(.u16, rule: .entryPath, "entry path")
            let size = try reader.u64("entry size")
            let mode = try reader.u32("entry mode")
            guard mode <= 0o7777 else { throw .invalidValue(field: "entry mode", value: UInt64(mode)) }
            let mtime = Int64(bitPattern: try reader.u64("entry mtime"))
            let manifest = try reader.prefixedBytes(.u32, limit: WireLimits.maxManifest, "manifest")
            entries.append(Entry(path: path, size: size, mode: mode, mtimeNanoseconds: mtime, manifest: manifest))
        }
        if kind != .folder && entries.count != 1 {
            throw .invalidValue(field: "entries of a single-file offer", value: UInt64(entries.count))
        }
        return TransferOffer(id: id, kind: kind, name: name, entries: entries)
    }
}

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerFiles

/// Packs a folder into a zip the way Magic Wormhole receivers expect one (names relative to
/// the folder, `/`-separated, UTF-8, Unix modes), with every entry stored: no deflater is
/// needed and any zip reader takes it. Symbolic links and special files are left out (and
/// counted). Zip64 where the classic fields do not reach (as Python's zipfile reads it): a
/// file or an offset from 4 GiB gets a zip64 field, over 65,534 entries or a directory past
/// 4 GiB a zip64 end record; at most `maxEntries` entries (what a syncpeer receiver takes).
struct FolderZipper {
    struct Summary: Equatable {
        var files = 0
        var bytes: Int64 = 0
        var skipped = 0
    }

    static let maxEntries = SafeUnzipper.maxEntries
    /// Sizes and offsets from here on are written as zip64 fields.
    static let zip64From: Int64 = 0xFFFF_FFFF

    private struct Central {
        let name: [UInt8]
        let crc: UInt32
        let size: Int64
        let offset: Int64
        let mode: UInt32
    }

    /// Writes the zip of `folder` to `zipPath` (created, never overwritten). `zip64From`: tests
    /// lower it to have every size and offset written as zip64.
    static func zip(folder: String, to zipPath: String, zip64From: Int64 = zip64From) throws(WormholeError) -> Summary {
        guard let out = PlainFile.writing(zipPath) else {
            throw .transfer("cannot create a temporary zip at \(zipPath)")
        }
        defer { out.close() }
        var summary = Summary()
        var central: [Central] = []
        var offset: Int64 = 0
        func write(_ bytes: [UInt8]) throws(WormholeError) {
            do { try out.write(bytes) } catch { throw .transfer("writing the zip: \(error)") }
            offset += Int64(bytes.count)
        }
        func add(_ relative: String, mode: UInt32, crc: UInt32, size: Int64, data: (([UInt8]) throws(WormholeError) -> Void) throws(WormholeError) -> Void) throws(WormholeError) {
            guard central.count < maxEntries else { throw .transfer("the folder has more than \(maxEntries) entries") }
            let name = Array(relative.utf8)
            central.append(Central(name: name, crc: crc, size: size, offset: offset, mode: mode))
            // A large file's local header carries both sizes as zip64 (APPNOTE 4.5.3).
            let wide = size >= zip64From
            let extra = wide ? zip64Extra([size, size]) : []
            var header = le32(0x0403_4B50) + le16(wide ? 45 : 20) + le16(0x0800) + le16(0) + le16(0) + le16(0x21) + le32(crc)
            header += classic(size, wide) + classic(size, wide) + le16(UInt16(name.count)) + le16(UInt16(extra.count))
            try write(header + name + extra)
            try data(write)
        }
        var stack = [""]
        while let relative = stack.popLast() {
            let absolute = relative.isEmpty ? folder : folder + "/" + relative
            let names: [String]
            do { names = try FileManager.default.contentsOfDirectory(atPath: absolute).sorted() } catch { throw .transfer("cannot list \(absolute)") }
            for name in names.reversed() {
                let childRelative = relative.isEmpty ? name : relative + "/" + name
                let child = folder + "/" + childRelative
                var info = stat()
                guard lstat(child, &info) == 0 else { summary.skipped += 1; continue }
                let mode = UInt32(info.st_mode)
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    try add(childRelative + "/", mode: mode, crc: 0, size: 0) { _ throws(WormholeError) in }
                    stack.append(childRelative)
                case S_IFREG:
                    let size = Int64(info.st_size)
                    var crc = CRC32()
                    try forEachChunk(of: child, size: size) { crc.update($0) }
                    try add(childRelative, mode: mode, crc: crc.value, size: size) { write throws(WormholeError) in
                        try forEachChunk(of: child, size: size) { chunk throws(WormholeError) in try write(chunk) }
                    }
                    summary.files += 1
                    summary.bytes += size
                default:
                    summary.skipped += 1
                }
            }
        }
        let directoryStart = offset
        for entry in central {
            let wideSize = entry.size >= zip64From, wideOffset = entry.offset >= zip64From
            let extra = zip64Extra((wideSize ? [entry.size, entry.size] : []) + (wideOffset ? [entry.offset] : []))
            var header = le32(0x0201_4B50) + le16(0x0314) + le16(extra.isEmpty ? 20 : 45) + le16(0x0800) + le16(0) + le16(0) + le16(0x21)
            header += le32(entry.crc) + classic(entry.size, wideSize) + classic(entry.size, wideSize)
            header += le16(UInt16(entry.name.count)) + le16(UInt16(extra.count)) + le16(0) + le16(0) + le16(0)
            header += le32(entry.mode << 16) + classic(entry.offset, wideOffset)
            try write(header + entry.name + extra)
        }
        let directorySize = offset - directoryStart
        let wideEnd = central.count > 0xFFFE || directorySize >= zip64From || directoryStart >= zip64From
        if wideEnd {
            // The zip64 end record, then its locator, just before the classic end record.
            let recordOffset = offset
            var record = le32(0x0606_4B50) + le64(44) + le16(0x032D) + le16(45) + le32(0) + le32(0)
            record += le64(Int64(central.count)) + le64(Int64(central.count)) + le64(directorySize) + le64(directoryStart)
            try write(record)
            try write(le32(0x0706_4B50) + le32(0) + le64(recordOffset) + le32(1))
        }
        let count = UInt16(min(central.count, 0xFFFF))
        try write(le32(0x0605_4B50) + le16(0) + le16(0) + le16(count) + le16(count)
                  + classic(directorySize, wideEnd) + classic(directoryStart, wideEnd) + le16(0))
        return summary
    }

    /// A classic 32-bit field: the value, or 0xFFFFFFFF when it is in a zip64 field.
    private static func classic(_ value: Int64, _ wide: Bool) -> [UInt8] { le32(wide ? 0xFFFF_FFFF : UInt32(value)) }

    /// The zip64 extended information field (id 1) holding `values`.
    private static func zip64Extra(_ values: [Int64]) -> [UInt8] {
        values.isEmpty ? [] : le16(1) + le16(UInt16(8 * values.count)) + values.flatMap(le64)
    }

    /// Calls `body` with the file's bytes in chunks; throws if the file changed size.
    private static func forEachChunk(of path: String, size: Int64, _ body: ([UInt8]) throws(WormholeError) -> Void) throws(WormholeError) {
        guard let handle = PlainFile.reading(path) else { throw .transfer("cannot read \(path)") }
        defer { handle.close() }
        var done: Int64 = 0
        while done < size {
            let data: [UInt8]
            do { data = try handle.read(upToCount: Int(min(1 << 20, size - done))) } catch { throw .transfer("reading \(path): \(error)") }
            guard !data.isEmpty else { throw .transfer("\(path) shrank while it was zipped") }
            try body(data)
            done += Int64(data.count)
        }
    }

    private static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    private static func le32(_ v: UInt32) -> [UInt8] { le16(UInt16(v & 0xFFFF)) + le16(UInt16(v >> 16)) }
    private static func le64(_ v: Int64) -> [UInt8] { le32(UInt32(truncatingIfNeeded: v)) + le32(UInt32(truncatingIfNeeded: v >> 32)) }
}

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import Foundation

/// Packs a folder into a zip the way Magic Wormhole receivers expect one (names relative to
/// the folder, `/`-separated, UTF-8, Unix modes), with every entry stored: no deflater is
/// needed and any zip reader takes it. Symbolic links and special files are left out (and
/// counted); no zip64, so at most 65,534 entries and 4 GiB.
struct FolderZipper {
    struct Summary: Equatable {
        var files = 0
        var bytes: Int64 = 0
        var skipped = 0
    }

    static let maxEntries = 65_534
    static let maxOffset: Int64 = 0xFFFF_FFFE

    private struct Central {
        let name: [UInt8]
        let crc: UInt32
        let size: UInt32
        let offset: UInt32
        let mode: UInt32
    }

    /// Writes the zip of `folder` to `zipPath` (created, never overwritten).
    static func zip(folder: String, to zipPath: String) throws(WormholeError) -> Summary {
        guard FileManager.default.createFile(atPath: zipPath, contents: nil), let out = FileHandle(forWritingAtPath: zipPath) else {
            throw .transfer("cannot create a temporary zip at \(zipPath)")
        }
        defer { try? out.close() }
        var summary = Summary()
        var central: [Central] = []
        var offset: Int64 = 0
        func write(_ bytes: [UInt8]) throws(WormholeError) {
            do { try out.write(contentsOf: bytes) } catch { throw .transfer("writing the zip: \(error)") }
            offset += Int64(bytes.count)
            guard offset <= maxOffset else { throw .transfer("the folder is over 4 GiB: too large to send as a zip (zip64 is not supported)") }
        }
        func add(_ relative: String, mode: UInt32, crc: UInt32, size: Int64, data: (([UInt8]) throws(WormholeError) -> Void) throws(WormholeError) -> Void) throws(WormholeError) {
            guard central.count < maxEntries else { throw .transfer("the folder has more than \(maxEntries) entries") }
            let name = Array(relative.utf8)
            central.append(Central(name: name, crc: crc, size: UInt32(size), offset: UInt32(offset), mode: mode))
            try write(le32(0x0403_4B50) + le16(20) + le16(0x0800) + le16(0) + le16(0) + le16(0x21)
                      + le32(crc) + le32(UInt32(size)) + le32(UInt32(size)) + le16(UInt16(name.count)) + le16(0) + name)
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
                    guard size <= maxOffset else { throw .transfer("\(childRelative) is over 4 GiB") }
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
            try write(le32(0x0201_4B50) + le16(0x0314) + le16(20) + le16(0x0800) + le16(0) + le16(0) + le16(0x21)
                      + le32(entry.crc) + le32(entry.size) + le32(entry.size) + le16(UInt16(entry.name.count)) + le16(0) + le16(0)
                      + le16(0) + le16(0) + le32(entry.mode << 16) + le32(entry.offset) + entry.name)
        }
        try write(le32(0x0605_4B50) + le16(0) + le16(0) + le16(UInt16(central.count)) + le16(UInt16(central.count))
                  + le32(UInt32(offset - directoryStart)) + le32(UInt32(directoryStart)) + le16(0))
        return summary
    }

    /// Calls `body` with the file's bytes in chunks; throws if the file changed size.
    private static func forEachChunk(of path: String, size: Int64, _ body: ([UInt8]) throws(WormholeError) -> Void) throws(WormholeError) {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw .transfer("cannot read \(path)") }
        defer { try? handle.close() }
        var done: Int64 = 0
        while done < size {
            let data: Data
            do { data = try handle.read(upToCount: Int(min(1 << 20, size - done))) ?? Data() } catch { throw .transfer("reading \(path): \(error)") }
            guard !data.isEmpty else { throw .transfer("\(path) shrank while it was zipped") }
            try body([UInt8](data))
            done += Int64(data.count)
        }
    }

    private static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    private static func le32(_ v: UInt32) -> [UInt8] { le16(UInt16(v & 0xFFFF)) + le16(UInt16(v >> 16)) }
}

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerFiles

/// Unpacks a zip file from a peer into a new folder, refusing anything that could write
/// outside it or more than it declares: absolute names, `..`, empty or control-character
/// components, symbolic links, duplicate names, methods other than stored and deflated, an
/// entry whose data inflates past its declared size or fails its CRC-32 or lies outside the
/// archive, and a total past `maxTotal`. Zip64 archives (over 65,535 entries or 4 GiB, as
/// Python's zipfile writes them) are read within the same bounds (`SafeUnzipper+Zip64.swift`).
/// On any refusal the folder is removed: nothing is left.
struct SafeUnzipper {
    static let maxEntries = 100_000
    static let maxNameLength = 4096
    static let maxCentralDirectory = 64 << 20

    struct Entry: Equatable {
        let name: String
        let method: Int
        let crc: UInt32
        let compressedSize: Int64
        let size: Int64
        let headerOffset: Int64
        let mode: mode_t?
        var isDirectory: Bool { name.hasSuffix("/") }
    }

    let zipPath: String
    let maxTotal: Int64

    /// Unpacks into `destination`, which must not exist yet; returns the files written.
    @discardableResult
    func unpack(into destination: String) throws(WormholeError) -> Int {
        guard mkdir(destination, 0o755) == 0 else { throw .transfer("cannot create \(destination): \(String(cString: strerror(errno)))") }
        do {
            return try unpackChecked(into: destination)
        } catch {
            try? FileManager.default.removeItem(atPath: destination)
            throw error
        }
    }

    private func unpackChecked(into destination: String) throws(WormholeError) -> Int {
        guard let file = PlainFile.reading(zipPath) else { throw .transfer("cannot read the received zip") }
        defer { file.close() }
        let entries = try centralDirectory(file)
        var seen = Set<String>()
        var total: Int64 = 0
        for entry in entries {
            let key = UnicodeForms.nfc(entry.name).lowercased()
            guard seen.insert(key.hasSuffix("/") ? String(key.dropLast()) : key).inserted else {
                throw .protocolViolation("the zip holds '\(entry.name)' twice")
            }
            total += entry.size
            guard total <= maxTotal else { throw .protocolViolation("the zip unpacks to more than the \(maxTotal) bytes offered") }
        }
        var files = 0
        for entry in entries {
            let path = destination + "/" + entry.name
            if entry.isDirectory {
                try makeParents(of: path + "x", under: destination)
                continue
            }
            try makeParents(of: path, under: destination)
            try extract(entry, from: file, to: path)
            files += 1
        }
        return files
    }

    /// Creates the folders above `path` (inside `root`, already checked to be safe names).
    private func makeParents(of path: String, under root: String) throws(WormholeError) {
        var current = root
        let relative = path.dropFirst(root.count + 1).split(separator: "/").dropLast()
        for component in relative {
            current += "/" + component
            if mkdir(current, 0o755) != 0 && errno != EEXIST { throw .transfer("cannot create \(current)") }
            var info = stat()
            guard lstat(current, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { throw .protocolViolation("'\(component)' is both a file and a folder") }
        }
    }

    /// Reads and checks the end record (zip64's when there is one) and the central directory.
    func centralDirectory(_ file: PlainFile) throws(WormholeError) -> [Entry] {
        let size: UInt64
        do { size = try file.size() } catch { throw .transfer("cannot read the received zip") }
        let bounds = try directoryBounds(file, fileSize: size)
        let count = bounds.count, cdSize = bounds.size, cdOffset = bounds.offset
        let directory = try read(file, at: UInt64(cdOffset), count: Int(cdSize))
        var entries: [Entry] = []
        var at = 0
        for _ in 0..<count {
            guard at + 46 <= directory.count, u32(directory, at) == 0x0201_4B50 else { throw .protocolViolation("damaged zip directory") }
            let madeBy = u16(directory, at + 4) >> 8
            let method = Int(u16(directory, at + 10))
            let nameLength = Int(u16(directory, at + 28)), extraLength = Int(u16(directory, at + 30)), commentLength = Int(u16(directory, at + 32))
            let external = u32(directory, at + 38)
            guard at + 46 + nameLength + extraLength + commentLength <= directory.count, nameLength <= Self.maxNameLength else {
                throw .protocolViolation("damaged zip directory")
            }
            let nameBytes = Array(directory[(at + 46)..<(at + 46 + nameLength)])
            guard let name = String(validating: nameBytes, as: UTF8.self) else { throw .protocolViolation("a zip entry name is not UTF-8") }
            var compressed = Int64(u32(directory, at + 20)), size = Int64(u32(directory, at + 24)), offset = Int64(u32(directory, at + 42))
            if compressed == 0xFFFF_FFFF || size == 0xFFFF_FFFF || offset == 0xFFFF_FFFF {
                let extra = directory[(at + 46 + nameLength)..<(at + 46 + nameLength + extraLength)]
                (size, compressed, offset) = try Self.zip64Fields(extra, size: size, compressed: compressed, offset: offset)
            }
            // The entry's header and data lie before the directory (a lying offset or size reads nothing else).
            guard offset <= cdOffset - 30, compressed <= cdOffset - 30 - offset else {
                throw .protocolViolation("a zip entry lies outside the archive ('\(name.prefix(100))')")
            }
            try Self.checkName(name)
            let unixMode: mode_t? = madeBy == 3 ? mode_t(external >> 16) : nil
            if let unixMode, unixMode & S_IFMT != 0, unixMode & S_IFMT != S_IFREG, unixMode & S_IFMT != S_IFDIR {
                throw .protocolViolation("the zip holds a link or special file: '\(name)'")
            }
            guard method == 0 || method == 8 else { throw .protocolViolation("zip method \(method) is not supported ('\(name)')") }
            entries.append(Entry(name: name, method: method, crc: u32(directory, at + 16), compressedSize: compressed, size: size,
                                 headerOffset: offset, mode: unixMode))
            at += 46 + nameLength + extraLength + commentLength
        }
        return entries
    }

    /// Refuses names that could leave the folder or confuse it.
    static func checkName(_ name: String) throws(WormholeError) {
        let trimmed = name.hasSuffix("/") ? String(name.dropLast()) : name
        let components = trimmed.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.hasPrefix("/"), !name.contains("\\"), !trimmed.isEmpty,
              components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." && $0.utf8.count <= 255 }),
              !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { throw .protocolViolation("unsafe name in the zip: '\(name.prefix(100))'") }
    }

    private func extract(_ entry: Entry, from file: PlainFile, to path: String) throws(WormholeError) {
        let header = try read(file, at: UInt64(entry.headerOffset), count: 30)
        guard u32(header, 0) == 0x0403_4B50 else { throw .protocolViolation("damaged zip entry '\(entry.name)'") }
        let dataStart = UInt64(entry.headerOffset) + 30 + UInt64(u16(header, 26)) + UInt64(u16(header, 28))
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .transfer("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var crc = CRC32()
        var remaining = entry.compressedSize
        var offset = dataStart
        let input = { () throws -> [UInt8]? in
            guard remaining > 0 else { return nil }
            let count = Int(min(remaining, 1 << 16))
            let bytes = try read(file, at: offset, count: count)
            offset += UInt64(count)
            remaining -= Int64(count)
            return bytes
        }
        let output = { (bytes: [UInt8]) throws -> Void in
            crc.update(bytes)
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written == bytes.count else { throw WormholeError.transfer("writing \(path): \(String(cString: strerror(errno)))") }
        }
        do {
            let produced: Int64
            if entry.method == 8 {
                var inflater = Inflater(limit: entry.size, input: input, output: output)
                produced = try inflater.run()
            } else {
                guard entry.compressedSize == entry.size else { throw WormholeError.protocolViolation("stored entry '\(entry.name)' has two sizes") }
                var total: Int64 = 0
                while let bytes = try input() { try output(bytes); total += Int64(bytes.count) }
                produced = total
            }
            guard produced == entry.size else { throw WormholeError.protocolViolation("'\(entry.name)' is not the size the zip declares") }
        } catch Inflater.Failure.overLimit {
            throw .protocolViolation("'\(entry.name)' unpacks to more than the \(entry.size) bytes it declares")
        } catch let error as WormholeError {
            throw error
        } catch {
            throw .protocolViolation("'\(entry.name)' does not inflate: \(error)")
        }
        guard crc.value == entry.crc else { throw .protocolViolation("'\(entry.name)' fails its CRC-32") }
        if let mode = entry.mode { fchmod(fd, mode & 0o755 | 0o600) }
    }

    func read(_ file: PlainFile, at offset: UInt64, count: Int) throws(WormholeError) -> [UInt8] {
        do {
            let data = try file.read(at: offset, upToCount: count)
            guard data.count == count else { throw WormholeError.protocolViolation("the zip is truncated") }
            return data
        } catch let error as WormholeError { throw error } catch { throw .transfer("reading the zip: \(error)") }
    }

    func u16(_ b: [UInt8], _ i: Int) -> UInt16 { UInt16(b[i]) | UInt16(b[i + 1]) << 8 }
    func u32(_ b: [UInt8], _ i: Int) -> UInt32 { UInt32(u16(b, i)) | UInt32(u16(b, i + 2)) << 16 }
}

/// CRC-32 (IEEE 802.3, reflected), as zip files carry it.
struct CRC32 {
    private static let table: [UInt32] = (0..<256).map { n in
        (0..<8).reduce(UInt32(n)) { c, _ in c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }
    private var state: UInt32 = 0xFFFF_FFFF

    mutating func update(_ bytes: [UInt8]) {
        for byte in bytes { state = Self.table[Int((state ^ UInt32(byte)) & 0xFF)] ^ (state >> 8) }
    }

    var value: UInt32 { state ^ 0xFFFF_FFFF }
}

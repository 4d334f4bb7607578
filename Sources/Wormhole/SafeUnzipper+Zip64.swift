internal import FoundationEssentials
internal import PeerFiles

/// Zip64 (PKWARE APPNOTE 4.3.14–4.3.16, 4.5.3), as Python's zipfile writes it for a folder
/// over 65,535 entries or 4 GiB: a zip64 end record and its locator just before the classic
/// end record, and per entry a zip64 field for each size or offset the entry sets to
/// 0xFFFFFFFF. Every value is checked as the classic ones are: the directory lies before the
/// end records and within `maxCentralDirectory`, at most `maxEntries`, disk numbers 0, two
/// records that disagree are refused.
///
///     … entries … | central directory | zip64 end (56) | locator (20) | end (22 + comment)
extension SafeUnzipper {
    /// Where the central directory is and how many entries it holds.
    struct DirectoryBounds: Equatable {
        var count: Int
        var size: Int64
        var offset: Int64
    }

    static let zip64EndLength = 56
    static let zip64LocatorLength = 20

    /// Finds the end record (and the zip64 one when the end record points to it) and checks
    /// the directory's bounds.
    func directoryBounds(_ file: PlainFile, fileSize: UInt64) throws(WormholeError) -> DirectoryBounds {
        guard fileSize >= 22 else { throw .protocolViolation("not a zip file (no end record)") }
        let tailLength = min(fileSize, 22 + 65535)
        let tailStart = fileSize - tailLength
        let tail = try read(file, at: tailStart, count: Int(tailLength))
        guard let end = (0...(tail.count - 22)).reversed().first(where: { tail[$0] == 0x50 && tail[$0 + 1] == 0x4B && tail[$0 + 2] == 5 && tail[$0 + 3] == 6 }) else {
            throw .protocolViolation("not a zip file (no end record)")
        }
        let endPosition = Int64(tailStart) + Int64(end)
        let classic = DirectoryBounds(count: Int(u16(tail, end + 10)), size: Int64(u32(tail, end + 12)), offset: Int64(u32(tail, end + 16)))
        guard u16(tail, end + 4) == 0, u16(tail, end + 6) == 0, u16(tail, end + 8) == u16(tail, end + 10) else {
            throw .protocolViolation("a zip split over several disks is not supported")
        }
        // 0xFFFF entries may be just that many (Python writes zip64 from 65,536); a size or
        // offset at its maximum is a zip64 one.
        let maxed = classic.size == 0xFFFF_FFFF || classic.offset == 0xFFFF_FFFF
        var bounds = classic
        var directoryLimit = endPosition
        let locatorPosition = endPosition - Int64(Self.zip64LocatorLength)
        var locator: [UInt8] = []
        if locatorPosition >= 0 { locator = try read(file, at: UInt64(locatorPosition), count: Self.zip64LocatorLength) }
        if locator.count == Self.zip64LocatorLength, u32(locator, 0) == 0x0706_4B50 {
            guard u32(locator, 4) == 0, u32(locator, 16) <= 1 else { throw .protocolViolation("a zip split over several disks is not supported") }
            guard let recordOffset = Int64(exactly: u64(locator, 8)), recordOffset >= 0,
                  recordOffset <= locatorPosition - Int64(Self.zip64EndLength) else {
                throw .protocolViolation("the zip64 end record lies outside the archive")
            }
            let record = try read(file, at: UInt64(recordOffset), count: Self.zip64EndLength)
            guard u32(record, 0) == 0x0606_4B50 else { throw .protocolViolation("damaged zip64 end record") }
            guard u32(record, 16) == 0, u32(record, 20) == 0, u64(record, 24) == u64(record, 32) else {
                throw .protocolViolation("a zip split over several disks is not supported")
            }
            // Counts and sizes past the bounds are refused before they are used as numbers.
            guard u64(record, 32) <= UInt64(Self.maxEntries), u64(record, 40) <= UInt64(Self.maxCentralDirectory),
                  let offset = Int64(exactly: u64(record, 48)) else {
                throw .protocolViolation("the zip's directory is too large or out of bounds")
            }
            let wide = DirectoryBounds(count: Int(u64(record, 32)), size: Int64(u64(record, 40)), offset: offset)
            // A classic field not at its maximum must say what the zip64 one says.
            guard classic.count == 0xFFFF || classic.count == wide.count, classic.size == 0xFFFF_FFFF || classic.size == wide.size,
                  classic.offset == 0xFFFF_FFFF || classic.offset == wide.offset else {
                throw .protocolViolation("the zip's two end records disagree")
            }
            bounds = wide
            directoryLimit = recordOffset
        } else if maxed {
            throw .protocolViolation("damaged zip64 archive (no zip64 end record)")
        }
        guard bounds.count <= Self.maxEntries, bounds.size <= Int64(Self.maxCentralDirectory), bounds.offset >= 0,
              bounds.offset <= directoryLimit - bounds.size else {
            throw .protocolViolation("the zip's directory is too large or out of bounds")
        }
        return bounds
    }

    /// An entry's sizes and offset with the zip64 field (id 1) of its `extra` data read in:
    /// the values the entry set to 0xFFFFFFFF, in the order size, compressed size, offset.
    static func zip64Fields(_ extra: ArraySlice<UInt8>, size: Int64, compressed: Int64, offset: Int64) throws(WormholeError) -> (Int64, Int64, Int64) {
        let extra = Array(extra)
        var at = 0
        while at + 4 <= extra.count {
            let id = UInt16(extra[at]) | UInt16(extra[at + 1]) << 8, length = Int(extra[at + 2]) | Int(extra[at + 3]) << 8
            guard at + 4 + length <= extra.count else { throw .protocolViolation("damaged zip directory (an extra field overruns its entry)") }
            if id == 1 {
                var values = (size, compressed, offset)
                var field = at + 4
                func next() throws(WormholeError) -> Int64 {
                    guard field + 8 <= at + 4 + length else { throw .protocolViolation("damaged zip directory (a zip64 field is short)") }
                    let value = (0..<8).reduce(UInt64(0)) { $0 | UInt64(extra[field + $1]) << (8 * UInt64($1)) }
                    field += 8
                    guard let signed = Int64(exactly: value) else { throw .protocolViolation("a zip64 size or offset out of range") }
                    return signed
                }
                if size == 0xFFFF_FFFF { values.0 = try next() }
                if compressed == 0xFFFF_FFFF { values.1 = try next() }
                if offset == 0xFFFF_FFFF { values.2 = try next() }
                return values
            }
            at += 4 + length
        }
        throw .protocolViolation("damaged zip directory (a zip64 entry without its zip64 field)")
    }

    func u64(_ b: [UInt8], _ i: Int) -> UInt64 { UInt64(u32(b, i)) | UInt64(u32(b, i + 4)) << 32 }
}

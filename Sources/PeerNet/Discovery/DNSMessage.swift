/// A DNS message (RFC 1035 §4) as used by multicast DNS: header, questions, and the
/// answer, authority and additional sections. Pure value; `encoded()` compresses names,
/// `init(decoding:)` accepts any bytes and either decodes or throws a `DNSError`.
package struct DNSMessage: Hashable, Sendable {
    /// The largest message decoded or encoded (the UDP payload limit).
    package static let maxSize = 65_535

    package var id: UInt16
    /// The flags word: QR, opcode, AA, TC, RD, RA, Z, AD, CD, RCODE.
    package var flags: UInt16
    package var questions: [DNSQuestion]
    package var answers: [DNSResourceRecord]
    package var authorities: [DNSResourceRecord]
    package var additionals: [DNSResourceRecord]

    package init(id: UInt16 = 0, flags: UInt16 = 0, questions: [DNSQuestion] = [],
                answers: [DNSResourceRecord] = [], authorities: [DNSResourceRecord] = [],
                additionals: [DNSResourceRecord] = []) {
        self.id = id
        self.flags = flags
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    /// QR | AA: the flags of every mDNS response (RFC 6762 §18).
    package static let responseFlags: UInt16 = 0x8400

    /// An mDNS query.
    package static func query(_ questions: [DNSQuestion], knownAnswers: [DNSResourceRecord] = [],
                             authorities: [DNSResourceRecord] = []) -> DNSMessage {
        DNSMessage(questions: questions, answers: knownAnswers, authorities: authorities)
    }

    /// An mDNS response.
    package static func response(answers: [DNSResourceRecord], additionals: [DNSResourceRecord] = []) -> DNSMessage {
        DNSMessage(flags: responseFlags, answers: answers, additionals: additionals)
    }

    package var isResponse: Bool { flags & 0x8000 != 0 }
    package var opcode: UInt8 { UInt8((flags >> 11) & 0xF) }
    package var isAuthoritative: Bool { flags & 0x0400 != 0 }
    package var isTruncated: Bool { flags & 0x0200 != 0 }
    package var rcode: UInt8 { UInt8(flags & 0xF) }

    /// Every record of the answer, authority and additional sections.
    package var allRecords: [DNSResourceRecord] { answers + authorities + additionals }
}

// MARK: Encoding

extension DNSMessage {
    /// The wire form. Names (owners, PTR and SRV targets) are compressed against every
    /// earlier name. Throws for labels over 63 bytes, names over 255, TXT strings over
    /// 255, or a message over 65,535 bytes.
    package func encoded() throws(DNSError) -> [UInt8] {
        var writer = DNSWriter()
        for count in [questions.count, answers.count, authorities.count, additionals.count] where count > 0xFFFF {
            throw .messageTooLarge
        }
        writer.u16(id)
        writer.u16(flags)
        writer.u16(UInt16(questions.count))
        writer.u16(UInt16(answers.count))
        writer.u16(UInt16(authorities.count))
        writer.u16(UInt16(additionals.count))
        for q in questions {
            try writer.name(q.name)
            writer.u16(q.type)
            writer.u16(q.recordClass & 0x7FFF | (q.unicastResponse ? 0x8000 : 0))
        }
        for r in answers + authorities + additionals {
            try writer.record(r)
        }
        guard writer.bytes.count <= Self.maxSize else { throw .messageTooLarge }
        return writer.bytes
    }
}

struct DNSWriter {
    var bytes: [UInt8] = []
    /// Offsets of names already written, keyed by their lowercased label suffix.
    private var offsets: [[[UInt8]]: Int] = [:]
    /// False to write every name in full (canonical record data for comparisons).
    var compression = true

    init(compression: Bool = true) {
        self.compression = compression
        bytes.reserveCapacity(512)
    }

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { bytes.append(UInt8(v >> 8)); bytes.append(UInt8(v & 0xFF)) }
    mutating func u32(_ v: UInt32) { u16(UInt16(v >> 16)); u16(UInt16(v & 0xFFFF)) }

    static func check(_ name: DNSName) throws(DNSError) {
        for label in name.labels {
            if label.isEmpty { throw .emptyLabel }
            if label.count > 63 { throw .labelTooLong(label.count) }
        }
        if name.wireLength > 255 { throw .nameTooLong(name.wireLength) }
    }

    /// Writes `name`, ending in a pointer to the longest suffix already written when
    /// `compress` (and remembering the new suffixes for later names).
    mutating func name(_ name: DNSName, compress: Bool = true) throws(DNSError) {
        try Self.check(name)
        let compress = compress && compression
        let canonical = name.canonical
        for i in 0..<name.labels.count {
            let suffix = Array(canonical[i...])
            if compress, let offset = offsets[suffix] {
                u16(0xC000 | UInt16(offset))
                return
            }
            if compress, bytes.count < 0x3FFF { offsets[suffix] = bytes.count }
            u8(UInt8(name.labels[i].count))
            bytes.append(contentsOf: name.labels[i])
        }
        u8(0)
    }

    mutating func record(_ r: DNSResourceRecord) throws(DNSError) {
        try name(r.name)
        u16(r.type)
        u16(r.recordClass & 0x7FFF | (r.cacheFlush ? 0x8000 : 0))
        u32(r.ttl)
        let lengthAt = bytes.count
        u16(0)
        switch r.data {
        case let .a(address):
            bytes.append(contentsOf: address.array)
        case let .aaaa(raw):
            guard raw.count == 16 else { throw .badRecordData(type: DNSRecordType.aaaa, reason: "\(raw.count) bytes, need 16") }
            bytes.append(contentsOf: raw)
        case let .ptr(target):
            try name(target)
        case let .srv(priority, weight, port, target):
            u16(priority); u16(weight); u16(port)
            try name(target)
        case let .txt(strings):
            if strings.isEmpty { u8(0) }
            for s in strings {
                guard s.count <= 255 else { throw .txtStringTooLong(s.count) }
                u8(UInt8(s.count))
                bytes.append(contentsOf: s)
            }
        case let .nsec(next, types):
            try name(next, compress: false)
            writeTypeBitmaps(types)
        case let .unknown(_, raw):
            bytes.append(contentsOf: raw)
        }
        let length = bytes.count - lengthAt - 2
        guard length <= 0xFFFF else { throw .messageTooLarge }
        bytes[lengthAt] = UInt8(length >> 8)
        bytes[lengthAt + 1] = UInt8(length & 0xFF)
    }

    /// RFC 4034 §4.1.2 type bit maps: per window of 256 types, the bitmap up to the last set bit.
    private mutating func writeTypeBitmaps(_ types: [UInt16]) {
        let sorted = Set(types).sorted()
        var windows: [UInt8: [UInt8]] = [:]
        for t in sorted {
            let window = UInt8(t >> 8)
            let low = Int(t & 0xFF)
            var map = windows[window] ?? []
            if map.count < low / 8 + 1 { map += [UInt8](repeating: 0, count: low / 8 + 1 - map.count) }
            map[low / 8] |= 0x80 >> UInt8(low % 8)
            windows[window] = map
        }
        for window in windows.keys.sorted() {
            let map = windows[window]!
            u8(window); u8(UInt8(map.count)); bytes.append(contentsOf: map)
        }
    }
}

// MARK: Decoding

extension DNSMessage {
    /// The most records `decodingTolerantly` skips in one message; past that the message
    /// is refused as a whole (it is more garbage than data).
    package static let maxSkippedRecords = 16

    /// Decodes `bytes`. Any malformation throws a `DNSError`; nothing traps, and the work
    /// is bounded by the message size (counts larger than the data fail as truncation).
    /// Bytes after the last record are ignored unless `strict`.
    package init(decoding bytes: [UInt8], strict: Bool = false) throws(DNSError) {
        var skipped: [DNSError] = []
        self = try Self.decode(bytes, strict: strict, tolerant: false, skipped: &skipped)
    }

    /// Decodes `bytes` as a multicast DNS receiver should (be liberal in what you accept):
    /// a record whose data does not parse is skipped, found by its RDLENGTH, and the rest of
    /// the message is kept; a record that cannot even be located (its owner name or header
    /// is broken, or its data runs past the end) ends the message there, keeping the records
    /// before it. Throws when the header or a question does not parse, or when more than
    /// `maxSkippedRecords` records had to be skipped. Returns the errors of what was skipped.
    /// (python-zeroconf 0.47.3, for one, writes NSEC type bitmaps with 16-bit window and
    /// length fields; its answers are otherwise fine.)
    package static func decodingTolerantly(_ bytes: [UInt8]) throws(DNSError) -> (message: DNSMessage, skipped: [DNSError]) {
        var skipped: [DNSError] = []
        let message = try decode(bytes, strict: false, tolerant: true, skipped: &skipped)
        return (message, skipped)
    }

    private static func decode(_ bytes: [UInt8], strict: Bool, tolerant: Bool,
                               skipped: inout [DNSError]) throws(DNSError) -> DNSMessage {
        var reader = DNSReader(bytes)
        let id = try reader.u16("header")
        let flags = try reader.u16("header")
        let qd = try reader.u16("header")
        let an = try reader.u16("header")
        let ns = try reader.u16("header")
        let ar = try reader.u16("header")
        var questions: [DNSQuestion] = []
        for _ in 0..<qd {
            let name = try reader.name()
            let type = try reader.u16("question")
            let cls = try reader.u16("question")
            questions.append(DNSQuestion(name: name, type: type, recordClass: cls & 0x7FFF,
                                         unicastResponse: cls & 0x8000 != 0))
        }
        var located = true
        func records(_ count: UInt16) throws(DNSError) -> [DNSResourceRecord] {
            var list: [DNSResourceRecord] = []
            guard located else { return list }
            for _ in 0..<count {
                let header: DNSReader.RecordHeader
                do throws(DNSError) { header = try reader.recordHeader() } catch {
                    guard tolerant else { throw error }
                    // Nothing after this point can be found: keep what came before.
                    skipped.append(error)
                    located = false
                    break
                }
                do throws(DNSError) { list.append(try reader.record(header)) } catch {
                    guard tolerant else { throw error }
                    skipped.append(error)
                    guard skipped.count <= maxSkippedRecords else { throw .tooManyBadRecords(skipped.count) }
                    reader.position = header.end
                }
            }
            return list
        }
        let answers = try records(an)
        let authorities = try records(ns)
        let additionals = try records(ar)
        if strict, reader.position < bytes.count { throw .trailingBytes(bytes.count - reader.position) }
        return DNSMessage(id: id, flags: flags, questions: questions, answers: answers,
                          authorities: authorities, additionals: additionals)
    }
}

struct DNSReader {
    let bytes: [UInt8]
    var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func u8(_ what: String) throws(DNSError) -> UInt8 {
        guard position < bytes.count else { throw .truncated(what, offset: position) }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u16(_ what: String) throws(DNSError) -> UInt16 {
        guard position + 2 <= bytes.count else { throw .truncated(what, offset: position) }
        defer { position += 2 }
        return UInt16(bytes[position]) << 8 | UInt16(bytes[position + 1])
    }

    mutating func u32(_ what: String) throws(DNSError) -> UInt32 {
        let hi = try u16(what)
        let lo = try u16(what)
        return UInt32(hi) << 16 | UInt32(lo)
    }

    mutating func take(_ count: Int, _ what: String) throws(DNSError) -> [UInt8] {
        guard count >= 0, position + count <= bytes.count else { throw .truncated(what, offset: position) }
        defer { position += count }
        return Array(bytes[position..<position + count])
    }

    /// Reads a possibly compressed name at `position` (which moves past its in-place part).
    /// Pointers must point backwards (before themselves), which rules out loops; a pointer
    /// to itself or to a pointer already followed is reported as a loop.
    mutating func name(limit: Int? = nil) throws(DNSError) -> DNSName {
        let end = limit ?? bytes.count
        var labels: [[UInt8]] = []
        var wireLength = 1
        var cursor = position
        var jumped = false
        var visited: Set<Int> = []
        while true {
            guard cursor < end || (jumped && cursor < bytes.count) else { throw .truncated("name", offset: cursor) }
            let length = bytes[cursor]
            switch length & 0xC0 {
            case 0x00:
                if length == 0 {
                    if !jumped { position = cursor + 1 }
                    return DNSName(labelBytes: labels)
                }
                let count = Int(length)
                let stop = jumped ? bytes.count : end
                guard cursor + 1 + count <= stop else { throw .truncated("label", offset: cursor) }
                wireLength += 1 + count
                guard wireLength <= 255 else { throw .nameTooLong(wireLength) }
                labels.append(Array(bytes[(cursor + 1)...(cursor + count)]))
                cursor += 1 + count
            case 0xC0:
                let stop = jumped ? bytes.count : end
                guard cursor + 2 <= stop else { throw .truncated("compression pointer", offset: cursor) }
                let target = Int(length & 0x3F) << 8 | Int(bytes[cursor + 1])
                guard target < bytes.count else { throw .pointerOutOfRange(target, offset: cursor) }
                if target == cursor || visited.contains(target) { throw .pointerLoop(offset: cursor) }
                guard target < cursor else { throw .forwardPointer(target, offset: cursor) }
                visited.insert(cursor)
                if !jumped { position = cursor + 2 }
                jumped = true
                cursor = target
            default:
                throw .invalidLabelLength(length, offset: cursor)
            }
        }
    }

    /// A record's owner, type, class, TTL and where its data lie.
    struct RecordHeader {
        var name: DNSName
        var type: UInt16
        var cls: UInt16
        var ttl: UInt32
        var start: Int
        var end: Int
    }

    /// Reads a record's header; afterwards `position` is at its data.
    mutating func recordHeader() throws(DNSError) -> RecordHeader {
        let name = try name()
        let type = try u16("record header")
        let cls = try u16("record header")
        let ttl = try u32("record header")
        let length = Int(try u16("record header"))
        let start = position
        guard start + length <= bytes.count else { throw .truncated("record data", offset: start) }
        return RecordHeader(name: name, type: type, cls: cls, ttl: ttl, start: start, end: start + length)
    }

    mutating func record() throws(DNSError) -> DNSResourceRecord {
        try record(try recordHeader())
    }

    /// Reads the data of the record `header` describes (`position` at its start); on
    /// success `position` is at its end.
    mutating func record(_ header: RecordHeader) throws(DNSError) -> DNSResourceRecord {
        let (name, type, cls, ttl, start, end) = (header.name, header.type, header.cls, header.ttl, header.start, header.end)
        let length = end - start
        let data: DNSRecordData
        switch type {
        case DNSRecordType.a:
            guard length == 4 else { throw .badRecordData(type: type, reason: "\(length) bytes, need 4") }
            data = .a(IPv4Address(bytes[start], bytes[start + 1], bytes[start + 2], bytes[start + 3]))
        case DNSRecordType.aaaa:
            guard length == 16 else { throw .badRecordData(type: type, reason: "\(length) bytes, need 16") }
            data = .aaaa(Array(bytes[start..<end]))
        case DNSRecordType.ptr:
            data = .ptr(try self.name(limit: end))
        case DNSRecordType.srv:
            guard length >= 7 else { throw .badRecordData(type: type, reason: "\(length) bytes, need at least 7") }
            let priority = try u16("SRV"), weight = try u16("SRV"), port = try u16("SRV")
            data = .srv(priority: priority, weight: weight, port: port, target: try self.name(limit: end))
        case DNSRecordType.txt:
            var strings: [[UInt8]] = []
            var p = start
            while p < end {
                let n = Int(bytes[p])
                guard p + 1 + n <= end else { throw .badRecordData(type: type, reason: "string runs past the record") }
                strings.append(Array(bytes[(p + 1)..<(p + 1 + n)]))
                p += 1 + n
            }
            // RFC 6763 §6.1: a single empty string means "no data".
            if strings == [[]] { strings = [] }
            data = .txt(strings)
        case DNSRecordType.nsec:
            let next = try self.name(limit: end)
            var types: [UInt16] = []
            var p = position
            while p < end {
                guard p + 2 <= end else { throw .badRecordData(type: type, reason: "truncated type bitmap") }
                let window = UInt16(bytes[p]), count = Int(bytes[p + 1])
                guard count >= 1, count <= 32, p + 2 + count <= end else {
                    throw .badRecordData(type: type, reason: "bad type bitmap length \(count)")
                }
                for i in 0..<count {
                    let byte = bytes[p + 2 + i]
                    for bit in 0..<8 where byte & (0x80 >> UInt8(bit)) != 0 {
                        types.append(window << 8 | UInt16(i * 8 + bit))
                    }
                }
                p += 2 + count
            }
            data = .nsec(next: next, types: types)
        default:
            data = .unknown(type: type, data: Array(bytes[start..<end]))
        }
        if type == DNSRecordType.ptr || type == DNSRecordType.srv, position != end {
            throw .badRecordData(type: type, reason: "\(end - position) extra bytes")
        }
        position = end
        return DNSResourceRecord(name: name, data: data, ttl: ttl, cacheFlush: cls & 0x8000 != 0,
                                 recordClass: cls & 0x7FFF)
    }
}

extension DNSRecordData {
    /// The record data in wire form without compression (RFC 6762 §8.2 compares these
    /// bytes in the probe tie-break). Empty when the data cannot be encoded.
    var uncompressedBytes: [UInt8] {
        var writer = DNSWriter(compression: false)
        let record = DNSResourceRecord(name: .root, data: self, ttl: 0)
        guard (try? writer.record(record)) != nil else { return [] }
        return Array(writer.bytes.dropFirst(11))  // root name (1), type, class, TTL, length
    }
}

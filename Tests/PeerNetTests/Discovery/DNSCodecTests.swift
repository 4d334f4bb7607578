import Testing
@testable import PeerNet
import TestKit

@Suite struct DNSCodecTests {
    static let service = DNSName("_syncpeer._tcp.local")
    static let instance = DNSName(labels: ["Alice's laptop. Home", "_syncpeer", "_tcp", "local"])
    static let host = DNSName("syncpeer-abc.local")

    static func sampleResponse() -> DNSMessage {
        DNSMessage.response(
            answers: [
                DNSResourceRecord(name: service, data: .ptr(instance), ttl: 4500),
                DNSResourceRecord(name: instance, data: .srv(priority: 0, weight: 0, port: 22000, target: host),
                                  ttl: 120, cacheFlush: true),
                DNSResourceRecord(name: instance, data: .txt([Array("id=ABC".utf8), Array("v=1".utf8)]),
                                  ttl: 4500, cacheFlush: true),
            ],
            additionals: [
                DNSResourceRecord(name: host, data: .a(IPv4Address(10, 99, 0, 1)), ttl: 120, cacheFlush: true),
                DNSResourceRecord(name: host, data: .aaaa(Array(0..<16)), ttl: 120, cacheFlush: true),
                DNSResourceRecord(name: instance, data: .nsec(next: instance, types: [1, 16, 33, 47, 300]), ttl: 120),
                DNSResourceRecord(name: host, data: .unknown(type: 99, data: [1, 2, 3]), ttl: 7),
                DNSResourceRecord(name: host, data: .txt([]), ttl: 7),
            ])
    }

    @Test func roundTripEveryRecordType() throws {
        var message = Self.sampleResponse()
        message.id = 0x1234
        message.questions = [DNSQuestion(name: Self.service, type: DNSRecordType.ptr, unicastResponse: true),
                             DNSQuestion(name: Self.host, type: DNSRecordType.a)]
        let bytes = try message.encoded()
        let decoded = try DNSMessage(decoding: bytes, strict: true)
        #expect(decoded == message)
        #expect(decoded.questions[0].unicastResponse)
        #expect(!decoded.questions[1].unicastResponse)
        #expect(decoded.answers[1].cacheFlush)
        #expect(!decoded.answers[0].cacheFlush)
        #expect(decoded.isResponse && decoded.isAuthoritative)
        #expect(decoded.answers[0].name.description == "_syncpeer._tcp.local")
        #expect(decoded.answers[1].name.firstLabel == "Alice's laptop. Home")
        // Re-encoding gives the same bytes.
        #expect(try decoded.encoded() == bytes)
    }

    @Test func compressionMakesSharedSuffixesSmaller() throws {
        let message = Self.sampleResponse()
        let compressed = try message.encoded()
        var plain = DNSWriter(compression: false)
        plain.u16(0); plain.u16(DNSMessage.responseFlags); plain.u16(0)
        plain.u16(UInt16(message.answers.count)); plain.u16(0); plain.u16(UInt16(message.additionals.count))
        for r in message.allRecords { try plain.record(r) }
        #expect(compressed.count < plain.bytes.count - 100)
        #expect(try DNSMessage(decoding: compressed) == message)
        #expect(try DNSMessage(decoding: plain.bytes) == message)
    }

    /// Hand-assembled from RFC 1035 §4.1 and RFC 6762 §18: a response with one PTR whose
    /// data ends in a pointer to the owner name at offset 12.
    static let handResponse: [UInt8] = [
        0x00, 0x00, 0x84, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x03, 0x5F, 0x73, 0x70, 0x04, 0x5F, 0x74, 0x63, 0x70, 0x05, 0x6C, 0x6F, 0x63, 0x61, 0x6C, 0x00,
        0x00, 0x0C, 0x00, 0x01, 0x00, 0x00, 0x11, 0x94, 0x00, 0x04,
        0x01, 0x61, 0xC0, 0x0C,
    ]

    @Test func knownAnswerBytes() throws {
        let message = DNSMessage.response(answers: [
            DNSResourceRecord(name: DNSName("_sp._tcp.local"), data: .ptr(DNSName("a._sp._tcp.local")), ttl: 4500),
        ])
        #expect(try message.encoded() == Self.handResponse)
        #expect(try DNSMessage(decoding: Self.handResponse, strict: true) == message)

        // A QU query for _sp._tcp.local PTR.
        let query: [UInt8] = [
            0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x03, 0x5F, 0x73, 0x70, 0x04, 0x5F, 0x74, 0x63, 0x70, 0x05, 0x6C, 0x6F, 0x63, 0x61, 0x6C, 0x00,
            0x00, 0x0C, 0x80, 0x01,
        ]
        let q = DNSMessage.query([DNSQuestion(name: DNSName("_sp._tcp.local"), type: DNSRecordType.ptr, unicastResponse: true)])
        #expect(try q.encoded() == query)
        #expect(try DNSMessage(decoding: query) == q)

        // SRV and TXT data layout (RFC 2782, RFC 6763 §6): empty TXT is one zero byte.
        let srvTxt = DNSMessage.response(answers: [
            DNSResourceRecord(name: DNSName("a.local"), data: .srv(priority: 1, weight: 2, port: 0x5566, target: DNSName("a.local")), ttl: 1),
            DNSResourceRecord(name: DNSName("a.local"), data: .txt([]), ttl: 1, cacheFlush: true),
        ])
        let expected: [UInt8] = [
            0x00, 0x00, 0x84, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
            0x01, 0x61, 0x05, 0x6C, 0x6F, 0x63, 0x61, 0x6C, 0x00,  // a.local at 12
            0x00, 0x21, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x08,
            0x00, 0x01, 0x00, 0x02, 0x55, 0x66, 0xC0, 0x0C,
            0xC0, 0x0C, 0x00, 0x10, 0x80, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
        ]
        #expect(try srvTxt.encoded() == expected)
    }

    @Test func namesCompareIgnoringASCIICase() {
        #expect(DNSName("_SyncPeer._TCP.Local") == DNSName("_syncpeer._tcp.local"))
        #expect(Set([DNSName("A.local"), DNSName("a.LOCAL")]).count == 1)
        #expect(DNSName("a.local") != DNSName("a.b.local"))
    }

    static let header1Question: [UInt8] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]

    @Test(arguments: [
        ("pointer to itself", header1Question + [0xC0, 12, 0, 1, 0, 1], DNSError.pointerLoop(offset: 12)),
        ("forward pointer", header1Question + [0xC0, 14, 0, 0, 1, 0, 1], .forwardPointer(14, offset: 12)),
        ("pointer out of range", header1Question + [0xC0, 0xFF, 0, 1, 0, 1], .pointerOutOfRange(255, offset: 12)),
        ("label type 01", header1Question + [0x40, 0, 0, 1, 0, 1], .invalidLabelLength(0x40, offset: 12)),
        ("label type 10", header1Question + [0x80, 0, 0, 1, 0, 1], .invalidLabelLength(0x80, offset: 12)),
        ("label past the end", header1Question + [5, 0x61, 0x62], .truncated("label", offset: 12)),
        ("no question type", header1Question + [1, 0x61, 0], .truncated("question", offset: 15)),
        ("short header", [0, 0, 0], .truncated("header", offset: 2)),
    ] as [(String, [UInt8], DNSError)])
    func malformed(_ label: String, _ bytes: [UInt8], _ expected: DNSError) {
        #expect(throws: expected, "\(label)") { try DNSMessage(decoding: bytes) }
    }

    @Test func pointerLoopThroughTwoPointers() {
        // Name at 12 is "a" + pointer to 17; at 17 a label + pointer back to 12: legal backward
        // pointer only once; the second jump returns to an already-followed pointer.
        var bytes: [UInt8] = [0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0]
        bytes += [1, 0x61, 0, 0, 1, 0, 1]        // question 1: "a" at 12..14
        bytes += [1, 0x62, 0xC0, 21, 0, 1, 0, 1]  // question 2 at 19: "b" + pointer at 21 to itself
        #expect(throws: DNSError.pointerLoop(offset: 21)) { try DNSMessage(decoding: bytes) }
    }

    @Test func overlongNameIsRejected() {
        var bytes = Self.header1Question
        for _ in 0..<5 { bytes += [63] + [UInt8](repeating: 0x61, count: 63) }
        bytes += [0, 0, 1, 0, 1]
        #expect(throws: DNSError.nameTooLong(257)) { try DNSMessage(decoding: bytes) }
        // The same through compression: each pointer adds a suffix.
        var chain = Self.header1Question
        chain[5] = 5
        var previous = -1
        for i in 0..<5 {
            let start = chain.count
            chain += [63] + [UInt8](repeating: 0x61 + UInt8(i), count: 63)
            if previous < 0 { chain += [0] } else { chain += [0xC0 | UInt8(previous >> 8), UInt8(previous & 0xFF)] }
            chain += [0, 1, 0, 1]
            previous = start
        }
        #expect(throws: DNSError.nameTooLong(257)) { try DNSMessage(decoding: chain) }
    }

    @Test func badRecordData() {
        let a: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 5, 1, 2, 3, 4, 5]
        #expect(throws: DNSError.badRecordData(type: 1, reason: "5 bytes, need 4")) { try DNSMessage(decoding: a) }
        let txt: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 16, 0, 1, 0, 0, 0, 1, 0, 2, 5, 0x61]
        #expect(throws: DNSError.badRecordData(type: 16, reason: "string runs past the record")) { try DNSMessage(decoding: txt) }
        let ptr: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 12, 0, 1, 0, 0, 0, 1, 0, 4, 1, 0x61, 0, 9]
        #expect(throws: DNSError.badRecordData(type: 12, reason: "1 extra bytes")) { try DNSMessage(decoding: ptr) }
    }

    @Test func truncationAtEveryLength() throws {
        var message = Self.sampleResponse()
        message.questions = [DNSQuestion(name: Self.service, type: DNSRecordType.ptr)]
        let bytes = try message.encoded()
        for n in 0..<bytes.count {
            #expect(throws: DNSError.self, "prefix of \(n) bytes") { try DNSMessage(decoding: Array(bytes[..<n])) }
        }
    }

    @Test func encodingLimits() {
        let long = String(repeating: "x", count: 64)
        #expect(throws: DNSError.labelTooLong(64)) {
            try DNSMessage.query([DNSQuestion(name: DNSName(labels: [long, "local"]), type: 1)]).encoded()
        }
        let labels = [String](repeating: String(repeating: "y", count: 60), count: 5)
        #expect(throws: DNSError.nameTooLong(306)) {
            try DNSMessage.query([DNSQuestion(name: DNSName(labels: labels), type: 1)]).encoded()
        }
        #expect(throws: DNSError.txtStringTooLong(256)) {
            try DNSMessage.response(answers: [DNSResourceRecord(name: DNSName("a.local"),
                                                                data: .txt([[UInt8](repeating: 0x61, count: 256)]), ttl: 1)]).encoded()
        }
    }

    @Test func txtDictionaryRules() {
        let strings: [[UInt8]] = ["id=X", "v=2", "ID=ignored", "flag", "=novalue", "empty=", "k=a=b"].map { Array($0.utf8) }
        let dict = txtDictionary(strings)
        #expect(dict == ["id": "X", "v": "2", "flag": "", "empty": "", "k": "a=b"])
    }

    /// 100,000 random and mutated packets (seeds: hand-made ones and the captured
    /// python-zeroconf 0.47.3 responses): both decoders return or throw a `DNSError`, never
    /// trap and never hang; whatever decodes also re-encodes without trapping.
    @Test func fuzz() throws {
        var rng = SplitMix64(seed: 0x5EED_D15C)
        var seeds: [[UInt8]] = [Self.handResponse]
        var sample = Self.sampleResponse()
        sample.questions = [DNSQuestion(name: Self.service, type: DNSRecordType.ptr)]
        seeds.append(try sample.encoded())
        seeds.append(try DNSMessage.query([DNSQuestion(name: Self.instance, type: 255, unicastResponse: true)],
                                          authorities: Array(sample.answers[1...2])).encoded())
        seeds += try Captures.zeroconf0473.map(\.bytes)
        var decodedCount = 0, tolerantCount = 0, mostSkipped = 0
        for i in 0..<100_000 {
            var bytes: [UInt8]
            if i % 4 == 0 {
                bytes = (0..<Int.random(in: 0...400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if bytes.count > 12, i % 8 == 0 { bytes[4] = 0; bytes[5] = 1; bytes[7] = UInt8.random(in: 0...3, using: &rng) }
            } else {
                bytes = seeds[Int.random(in: 0..<seeds.count, using: &rng)]
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    guard !bytes.isEmpty else { break }
                    let at = Int.random(in: 0..<bytes.count, using: &rng)
                    switch Int.random(in: 0...5, using: &rng) {
                    case 0: bytes[at] = UInt8.random(in: 0...255, using: &rng)
                    case 1: bytes[at] ^= 1 << UInt8.random(in: 0...7, using: &rng)
                    case 2: bytes.removeSubrange(at...)
                    case 3: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: at)
                    case 4: bytes[at] = 0xC0 | UInt8.random(in: 0...0x3F, using: &rng)
                    default: if at + 1 < bytes.count { bytes[at] = 0xC0; bytes[at + 1] = UInt8.random(in: 0...255, using: &rng) }
                    }
                }
            }
            do throws(DNSError) {
                let message = try DNSMessage(decoding: bytes)
                decodedCount += 1
                _ = try? message.encoded()
            } catch {
                // A typed DNSError: the only kind `init(decoding:)` can throw.
                _ = error.description
            }
            // The tolerant decoder (what the advertiser and browser use) on the same bytes:
            // it keeps at least what the strict one keeps.
            do throws(DNSError) {
                let (message, skipped) = try DNSMessage.decodingTolerantly(bytes)
                tolerantCount += 1
                mostSkipped = max(mostSkipped, skipped.count)
                _ = message.allRecords.count
            } catch {
                _ = error.description
            }
        }
        #expect(decodedCount > 1_000)
        #expect(tolerantCount >= decodedCount)
        #expect(mostSkipped <= DNSMessage.maxSkippedRecords)
    }
}

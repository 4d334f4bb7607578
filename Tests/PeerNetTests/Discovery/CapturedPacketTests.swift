import Foundation
import PeerNet
import Testing

/// Real-world packets captured from other mDNS implementations (Captures/*.txt, made by
/// the capture scripts beside them), as `LABEL HEX` lines.
enum Captures {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Captures")

    static func load(_ file: String) throws -> [(label: String, bytes: [UInt8])] {
        let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#") else { return nil }
            let parts = line.split(separator: " ")
            guard parts.count == 2 else { return nil }
            return (String(parts[0]), hexBytes(String(parts[1])))
        }
    }

    static func hexBytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// python3-zeroconf 0.47.3 (Debian bookworm): each response ends with an NSEC record
    /// whose type bitmap has 16-bit window and length fields (00 00 00 04 …) instead of
    /// RFC 4034's 8-bit ones.
    static var zeroconf0473: [(label: String, bytes: [UInt8])] { get throws { try load("zeroconf-0.47.3.txt") } }
}

/// Issue 14.2: a record that does not parse is skipped and the rest of the packet kept.
struct CapturedPacketTests {
    static let service = DNSName("_syncpeer._tcp.local")
    static let instance = DNSName(labels: ["ZC Peer", "_syncpeer", "_tcp", "local"])
    static let host = DNSName("zc-peer.local")

    /// The PTR response python-zeroconf 0.47.3 sends to a browser that starts after it.
    static func ptrResponse() throws -> [UInt8] {
        try #require(try Captures.zeroconf0473.first { $0.label == "PTR" }).bytes
    }

    @Test func everyZeroconf0473ResponseKeepsAllButItsNSEC() throws {
        let captures = try Captures.zeroconf0473
        #expect(captures.count >= 3)
        for (label, bytes) in captures {
            // The strict decoder refuses the whole packet because of the one NSEC record ...
            #expect(throws: DNSError.self, "\(label)") { try DNSMessage(decoding: bytes) }
            // ... the tolerant one keeps every other record.
            let (message, skipped) = try DNSMessage.decodingTolerantly(bytes)
            #expect(skipped.count == 1, "\(label): \(skipped)")
            if case let .badRecordData(type, _)? = skipped.first { #expect(type == DNSRecordType.nsec) } else {
                Issue.record("\(label): not an NSEC data error: \(skipped)")
            }
            #expect(message.isResponse)
            #expect(!message.allRecords.contains { $0.type == DNSRecordType.nsec })
            #expect(message.allRecords.contains { $0.name == Self.host && $0.data == .a(IPv4Address(127, 0, 0, 1)) }, "\(label)")
        }
        let ptr = try DNSMessage.decodingTolerantly(try Self.ptrResponse()).message
        #expect(ptr.answers.map(\.data) == [.ptr(Self.instance)])
        #expect(ptr.additionals.count == 3)
        #expect(ptr.additionals.contains { $0.data == .srv(priority: 0, weight: 0, port: 47001, target: Self.host) })
        #expect(ptr.additionals.contains { $0.name == Self.instance && $0.data == .txt([Array("id=ZC-ID".utf8), Array("v=1".utf8)]) })
    }

    /// The zeroconf NSEC (its rdata as captured, next name written in full) placed first
    /// among the records, then mutated at every byte to every one of a few values: the
    /// records after it are always kept.
    @Test func mutatedNSECInFrontNeverCostsTheOtherRecords() throws {
        let good: [DNSResourceRecord] = [
            DNSResourceRecord(name: Self.service, data: .ptr(Self.instance), ttl: 4500),
            DNSResourceRecord(name: Self.instance, data: .srv(priority: 0, weight: 0, port: 47001, target: Self.host), ttl: 120, cacheFlush: true),
            DNSResourceRecord(name: Self.host, data: .a(IPv4Address(127, 0, 0, 1)), ttl: 120, cacheFlush: true),
        ]
        // zeroconf's NSEC rdata: next name (zc-peer.local, uncompressed), 00 00 00 04, bitmap 00 00 00 08.
        let nsecData = [7] + Array("zc-peer".utf8) + [5] + Array("local".utf8) + [0, 0, 0, 0, 4, 0, 0, 0, 8]
        let nsec = DNSResourceRecord(name: Self.host, data: .unknown(type: DNSRecordType.nsec, data: nsecData), ttl: 4500, cacheFlush: true)
        let packet = try DNSMessage.response(answers: [nsec] + good).encoded()
        // Where the NSEC data start: header (12), owner name (15), type/class/TTL/length (10).
        let dataStart = 12 + Self.host.wireLength + 10
        #expect(Array(packet[dataStart..<dataStart + nsecData.count]) == nsecData)

        var decoded = 0, refused = 0
        for offset in dataStart..<(dataStart + nsecData.count) {
            for value: UInt8 in [0x00, 0x01, 0x04, 0x20, 0x3F, 0x40, 0x80, 0xC0, 0xC1, 0xFF] {
                var bytes = packet
                bytes[offset] = value
                do {
                    let (message, skipped) = try DNSMessage.decodingTolerantly(bytes)
                    #expect(skipped.count <= 1)
                    #expect(Array(message.answers.suffix(3)) == good, "offset \(offset) = \(value): \(skipped)")
                    decoded += 1
                } catch {
                    refused += 1
                    Issue.record("offset \(offset) = \(value) refused the whole packet: \(error)")
                }
            }
        }
        #expect(decoded > 0 && refused == 0)
    }

    /// An NSEC whose RDLENGTH runs past the end cannot be stepped over: the records before
    /// it are kept, and nothing traps.
    @Test func recordRunningPastTheEndKeepsWhatCameBefore() throws {
        var bytes = try Self.ptrResponse()
        // The NSEC is last; its RDLENGTH sits 12 bytes before the end (2 + 10 bytes of data).
        #expect(bytes[bytes.count - 12] == 0 && bytes[bytes.count - 11] == 10)
        bytes[bytes.count - 11] = 200
        let (message, skipped) = try DNSMessage.decodingTolerantly(bytes)
        #expect(skipped.count == 1)
        #expect(message.answers.count == 1 && message.additionals.count == 3)
    }

    /// Bounded: up to `maxSkippedRecords` bad records are skipped; one more refuses the packet.
    @Test func skippingIsBounded() throws {
        let bad = DNSResourceRecord(name: Self.host, data: .unknown(type: DNSRecordType.a, data: [1, 2, 3]), ttl: 120)
        let ptr = DNSResourceRecord(name: Self.service, data: .ptr(Self.instance), ttl: 4500)
        let limit = DNSMessage.maxSkippedRecords
        let atLimit = try DNSMessage.response(answers: [ptr] + Array(repeating: bad, count: limit)).encoded()
        let (message, skipped) = try DNSMessage.decodingTolerantly(atLimit)
        #expect(message.answers == [ptr] && skipped.count == limit)
        let over = try DNSMessage.response(answers: [ptr] + Array(repeating: bad, count: limit + 1)).encoded()
        #expect(throws: DNSError.tooManyBadRecords(limit + 1)) { try DNSMessage.decodingTolerantly(over) }
    }

    /// Cut at every length: never a trap; a message that decodes holds only whole records
    /// of the original, in order.
    @Test func capturedPacketCutAtEveryLength() throws {
        let bytes = try Self.ptrResponse()
        let full = try DNSMessage.decodingTolerantly(bytes).message.allRecords
        for length in 0..<bytes.count {
            guard let message = try? DNSMessage.decodingTolerantly(Array(bytes[..<length])).message else { continue }
            let records = message.allRecords
            #expect(Array(full.prefix(records.count)) == records, "cut at \(length)")
        }
    }
}

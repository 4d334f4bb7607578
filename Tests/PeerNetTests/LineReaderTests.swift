import PeerNet
import Synchronization
import Testing

/// A ByteStream that returns scripted reads, to split lines exactly where a test wants.
final class ScriptedStream: ByteStream {
    enum Step: Sendable {
        case bytes([UInt8])
        case timeout
    }

    private let steps: Mutex<[Step]>
    let reads = Atomic<Int>(0)
    let written = Mutex<[UInt8]>([])

    init(_ steps: [Step]) {
        self.steps = Mutex(steps)
    }

    convenience init(chunks: [String]) {
        self.init(chunks.map { .bytes(Array($0.utf8)) })
    }

    func read(maxCount: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8] {
        reads.add(1, ordering: .relaxed)
        let step = steps.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        switch step {
        case nil:
            return []
        case .timeout:
            throw .timedOut("scripted")
        case let .bytes(bytes):
            precondition(bytes.count <= maxCount, "script step larger than the read")
            return bytes
        }
    }

    func write(_ bytes: [UInt8]) throws(NetError) { written.withLock { $0 += bytes } }
    func shutdownWrite() {}
    func close() {}
    var remoteDescription: String { "script" }
}

@Suite struct LineReaderTests {
    private func allLines(_ reader: inout LineReader) throws -> [String] {
        var lines: [String] = []
        while let line = try reader.readLine() { lines.append(line) }
        return lines
    }

    @Test func linesSplitAcrossReads() throws {
        var reader = LineReader(ScriptedStream(chunks: ["hel", "lo\nwo", "rld\n\nthird\nla", "st"]))
        #expect(try allLines(&reader) == ["hello", "world", "", "third", "last"])
        #expect(try reader.readLine() == nil)  // stays at the end
    }

    @Test func oneByteAtATimeAndCRLF() throws {
        let text = "a\r\nbc\n{\"k\":\"é\"}\n"
        var reader = LineReader(ScriptedStream(Array(text.utf8).map { .bytes([$0]) }))
        #expect(try allLines(&reader) == ["a", "bc", "{\"k\":\"é\"}"])
    }

    @Test func aLastLineWithoutNewlineAndAnEmptyStream() throws {
        var last = LineReader(ScriptedStream(chunks: ["only"]))
        #expect(try last.readLine() == "only")
        #expect(try last.readLine() == nil)
        var empty = LineReader(ScriptedStream(chunks: []))
        #expect(try empty.readLine() == nil)
    }

    @Test func manyLinesInOneRead() throws {
        let lines = (0..<10_000).map { "line \($0)" }
        let stream = ScriptedStream([.bytes(Array((lines.joined(separator: "\n") + "\n").utf8))])
        var reader = LineReader(stream, chunkSize: 1 << 20)
        #expect(try allLines(&reader) == lines)
        #expect(stream.reads.load(ordering: .relaxed) == 2)  // the data, then the end
    }

    @Test func aLineOfExactlyTheLimitPassesOneByteMoreFails() throws {
        var exact = LineReader(ScriptedStream(chunks: ["12345678\n", "123", "4567\r\n"]), maxLineLength: 8)
        #expect(try allLines(&exact) == ["12345678", "1234567"])  // a "\r" counts

        var over = LineReader(ScriptedStream(chunks: ["ok\n123456789\nnext\n"]), maxLineLength: 8)
        #expect(try over.readLine() == "ok")
        #expect(netError { try over.readLine() } == .protocolViolation("line longer than 8 bytes"))

        var unterminated = LineReader(ScriptedStream(chunks: ["123456789"]), maxLineLength: 8)
        #expect(netError { try unterminated.readLine() } == .protocolViolation("line longer than 8 bytes"))
    }

    @Test func anEndlessLineFailsWithoutReadingEverything() throws {
        let stream = ScriptedStream(Array(repeating: .bytes(Array(repeating: 0x61, count: 1000)), count: 10_000))
        var reader = LineReader(stream, maxLineLength: 4096)
        #expect(netError { try reader.readLine() } == .protocolViolation("line longer than 4096 bytes"))
        #expect(stream.reads.load(ordering: .relaxed) <= 5)
    }

    @Test func invalidUTF8IsAProtocolViolation() {
        var reader = LineReader(ScriptedStream([.bytes([0x61, 0xFF, 0x62, 0x0A])]))
        #expect(netError { try reader.readLine() } == .protocolViolation("line is not valid UTF-8"))
    }

    @Test func aTimeoutKeepsThePartialLine() throws {
        let stream = ScriptedStream([.bytes(Array("par".utf8)), .timeout, .bytes(Array("tial\nnext".utf8))])
        var reader = LineReader(stream)
        #expect(netError { try reader.readLine(deadline: .now) } == .timedOut("scripted"))
        #expect(try reader.readLine() == "partial")
        #expect(try reader.readLine() == "next")
        #expect(try reader.readLine() == nil)
    }

    @Test func writeLineAppendsANewlineAndRefusesEmbeddedOnes() throws {
        let stream = ScriptedStream(chunks: [])
        try stream.writeLine("{\"a\":1}")
        try stream.writeLine("")
        #expect(netError { try stream.writeLine("two\nlines") } == .protocolViolation("a line to send contains a newline"))
        #expect(stream.written.withLock { $0 } == Array("{\"a\":1}\n\n".utf8))
    }

    @Test func overARealSocket() throws {
        let (a, b) = try socketPair()
        defer { a.close(); b.close() }
        let lines = (0..<2_000).map { String(repeating: "x", count: $0 % 300) + "\($0)" }
        let writer = Background {
            for line in lines { try a.writeLine(line) }
            a.shutdownWrite()
        }
        var reader = LineReader(b, chunkSize: 1000)
        var got: [String] = []
        while let line = try reader.readLine(deadline: .now + .seconds(30)) { got.append(line) }
        try writer.join()
        #expect(got == lines)
    }
}

/// Reads `\n`-delimited UTF-8 lines from a `ByteStream`, however the bytes are split
/// across reads: the framing of the NDJSON control protocol.
///
/// A trailing `\r` is dropped (so "\r\n" works too). A last line without a newline is
/// returned at the end of the stream; after that `readLine` returns nil. A line longer
/// than `maxLineLength` bytes (counting a `\r` but not the `\n`), or one that is not valid
/// UTF-8, throws `NetError.protocolViolation`; the stream should then be closed.
package struct LineReader: Sendable {
    /// The default limit: 1 MiB.
    package static let defaultMaxLineLength = 1 << 20

    package let stream: any ByteStream
    package let maxLineLength: Int
    private let chunkSize: Int

    private var buffer: [UInt8] = []
    /// The first byte of `buffer` not yet returned.
    private var start = 0
    /// Bytes after `start` already searched for a newline.
    private var scanned = 0
    private var atEnd = false

    package init(_ stream: any ByteStream, maxLineLength: Int = LineReader.defaultMaxLineLength,
                chunkSize: Int = 64 * 1024) {
        precondition(maxLineLength > 0 && chunkSize > 0)
        self.stream = stream
        self.maxLineLength = maxLineLength
        self.chunkSize = chunkSize
    }

    /// The next line without its newline, or nil at the end of the stream.
    /// Throws `NetError.timedOut` if `deadline` passes before a whole line has arrived;
    /// the bytes read so far are kept for the next call.
    package mutating func readLine(deadline: ContinuousClock.Instant? = nil) throws(NetError) -> String? {
        while true {
            let searchFrom = start + scanned
            if let newline = buffer[searchFrom...].firstIndex(of: 0x0A) {
                let line = try takeLine(upTo: newline)
                start = newline + 1
                scanned = 0
                return line
            }
            scanned = buffer.count - start
            if scanned > maxLineLength {
                throw .protocolViolation("line longer than \(maxLineLength) bytes")
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = try takeLine(upTo: buffer.count)
                start = buffer.count
                scanned = 0
                return line
            }
            let bytes = try stream.read(maxCount: chunkSize, deadline: deadline)
            if bytes.isEmpty {
                atEnd = true
            } else {
                if start > 0 {
                    buffer.removeSubrange(0..<start)
                    start = 0
                }
                buffer.append(contentsOf: bytes)
            }
        }
    }

    private func takeLine(upTo end: Int) throws(NetError) -> String {
        var end = end
        if end - start > maxLineLength {
            throw .protocolViolation("line longer than \(maxLineLength) bytes")
        }
        if end > start, buffer[end - 1] == 0x0D { end -= 1 }
        guard let line = String(validating: buffer[start..<end], as: UTF8.self) else {
            throw .protocolViolation("line is not valid UTF-8")
        }
        return line
    }
}

extension ByteStream {
    /// Writes `line` and a `\n`. A line that itself contains a newline would break the
    /// framing: it throws `NetError.protocolViolation` and nothing is written.
    package func writeLine(_ line: String) throws(NetError) {
        var bytes = Array(line.utf8)
        guard !bytes.contains(0x0A) else { throw .protocolViolation("a line to send contains a newline") }
        bytes.append(0x0A)
        try write(bytes)
    }
}

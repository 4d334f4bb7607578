#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Moves bytes between a descriptor (a pipe, a terminal, a file) and a byte stream, live:
/// what the descriptor yields is on the wire at once, and memory stays bounded by one
/// buffer plus the stream's window (a slow peer stops `send` reading; a slow output stops
/// `receive` taking, which stops granting credit to the writer).
enum StreamPump {
    static let bufferSize = 256 * 1024
    /// How often `send` reports its progress.
    static let progressInterval: Duration = .milliseconds(200)

    /// Writes what `input` reads to `stream` until end of file, then finishes the stream.
    /// A read error or a client that went away cuts the stream (the peer sees it cut).
    /// `progress` gets the bytes written so far at once (0), then at most every 200 ms.
    static func send(from input: Int32, to stream: OutgoingByteStream, clientGone: () -> Bool,
                     progress: (Int64) -> Void = { _ in }) throws(EngineError) -> StreamResult {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var reported = ContinuousClock.now
        var reportedBytes: Int64 = 0
        progress(0)
        while true {
            if ContinuousClock.now - reported >= progressInterval {
                reported = .now
                if stream.bytesWritten != reportedBytes {
                    reportedBytes = stream.bytesWritten
                    progress(reportedBytes)
                }
            }
            // A producer that pauses leaves us waiting in read: wait in steps instead, so
            // what went out is reported (and a client that gave up noticed) meanwhile.
            var ready = pollfd(fd: input, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, Int32(progressInterval.components.seconds * 1000
                + progressInterval.components.attoseconds / 1_000_000_000_000_000)) == 0 { continue }
            if clientGone() {
                stream.cancel(reason: "the sender stopped")
                throw .streamCut("the client went away; the stream '\(stream.name)' is cut")
            }
            let n = read(input, buffer.baseAddress, buffer.count)
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                stream.cancel(reason: "the sender's input failed")
                throw .io(path: "standard input", reason: "cannot read: \(reason); the stream '\(stream.name)' is cut")
            }
            do throws(EngineError) { try stream.write(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) } catch {
                stream.cancel(reason: "write failed")
                throw error
            }
        }
        try stream.finish()
        return StreamResult(peer: stream.peer, name: stream.name, bytes: stream.bytesWritten)
    }

    /// Writes `stream` to `output` until the stream is complete. A cut stream throws
    /// `streamCut`; an output that fails (a closed pipe) cuts the stream for the writer.
    static func receive(_ stream: IncomingByteStream, to output: Int32,
                        clientGone: () -> Bool) throws(EngineError) -> StreamResult {
        var written: Int64 = 0
        while true {
            let piece: [UInt8]?
            do throws(EngineError) { piece = try stream.next(timeout: .seconds(1)) } catch {
                if case .network = error {  // nothing for a second: is anyone still there?
                    if clientGone() {
                        stream.cancel(reason: "the receiver stopped")
                        throw .streamCut("the client went away; the stream '\(stream.name)' is cut")
                    }
                    continue
                }
                throw error
            }
            guard let piece else { break }
            var offset = 0
            while offset < piece.count {
                let n = piece.withUnsafeBytes { write(output, $0.baseAddress! + offset, piece.count - offset) }
                if n < 0 {
                    if errno == EINTR { continue }
                    let reason = String(cString: strerror(errno))
                    stream.cancel(reason: "the receiver's output failed")
                    throw .io(path: "standard output", reason: "cannot write: \(reason); the stream '\(stream.name)' is cut")
                }
                offset += n
            }
            written += Int64(piece.count)
        }
        return StreamResult(peer: stream.peer, name: stream.name, bytes: written)
    }
}

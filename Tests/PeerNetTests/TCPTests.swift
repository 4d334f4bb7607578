import Foundation
import PeerNet
import Testing

/// Real TCP sockets on 127.0.0.1 / ::1 only.
@Suite struct TCPTests {
    @Test func echoesTenMiBInBothDirectionsAtOnce() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close(); server.close() }
        let payload = patternBytes(10 << 20)

        // The server echoes everything back while the client is still sending, so both
        // directions carry data at the same time (and would deadlock without buffering
        // on the reading side).
        let echo = Background {
            var total = 0
            while true {
                let bytes = try server.read(maxCount: 100_000, deadline: nil)
                if bytes.isEmpty { break }
                total += bytes.count
                try server.write(bytes)
            }
            server.shutdownWrite()
            return total
        }
        let receiver = Background { try readAll(client, chunk: 70_001) }
        let sender = Background {
            var offset = 0
            var size = 1
            while offset < payload.count {  // uneven writes, from 1 byte up to ~1 MiB
                let end = min(payload.count, offset + size)
                try client.write(Array(payload[offset..<end]))
                offset = end
                size = size * 3 + 7
                if size > 1 << 20 { size = 13 }
            }
            client.shutdownWrite()
        }
        try sender.join()
        #expect(try echo.join() == payload.count)
        let received = try receiver.join()
        #expect(received.count == payload.count)
        #expect(received == payload)
    }

    @Test func readReturnsAtMostMaxCount() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close(); server.close() }
        try client.write(Array(1...10))
        var got: [UInt8] = []
        while got.count < 10 {
            let bytes = try server.read(maxCount: 3, deadline: .now + .seconds(10))
            #expect(!bytes.isEmpty && bytes.count <= 3)
            got += bytes
        }
        #expect(got == Array(1...10))
    }

    @Test func endOfStreamAfterShutdownWriteThenOtherDirectionStillWorks() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close(); server.close() }
        try client.write(Array("hello".utf8))
        client.shutdownWrite()
        #expect(try readAll(server) == Array("hello".utf8))
        #expect(try server.read(maxCount: 10, deadline: nil) == [])
        try server.write(Array("back".utf8))
        server.close()
        #expect(try readAll(client) == Array("back".utf8))
    }

    @Test func readOnASilentPeerTimesOut() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close(); server.close() }
        let start = ContinuousClock.now
        let error = netError { try server.read(maxCount: 10, deadline: .now + .milliseconds(200)) }
        guard case .timedOut = error else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
        #expect(ContinuousClock.now - start < .seconds(10))
        // The connection is still usable afterwards.
        try client.write([42])
        #expect(try server.read(maxCount: 10, deadline: .now + .seconds(10)) == [42])
        // A deadline already past still times out rather than blocking.
        guard case .timedOut = netError({ try server.read(maxCount: 1, deadline: .now - .seconds(1)) }) else {
            Issue.record("a past deadline did not time out")
            return
        }
    }

    @Test func closeWakesABlockedReader() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close() }
        let reader = Background { () -> String in
            do {
                let bytes = try server.read(maxCount: 100, deadline: nil)
                return bytes.isEmpty ? "end" : "data"
            } catch NetError.closed {
                return "closed"
            }
        }
        Thread.sleep(forTimeInterval: 0.2)
        server.close()
        let outcome = try reader.join(within: 10)
        #expect(outcome == "end" || outcome == "closed")
        // The peer sees the end of the stream.
        #expect(try client.read(maxCount: 10, deadline: .now + .seconds(10)) == [])
    }

    @Test func closeWakesABlockedAccept() throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        let acceptor = Background { () -> NetError? in netError { try listener.accept() } }
        Thread.sleep(forTimeInterval: 0.2)
        listener.close()
        let error = try acceptor.join(within: 10)
        guard case .closed = error else {
            Issue.record("expected closed, got \(String(describing: error))")
            return
        }
        guard case .closed = netError({ try listener.accept() }) else {
            Issue.record("accept after close did not throw closed")
            return
        }
    }

    @Test func useAfterCloseThrowsClosedAndCloseIsIdempotent() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); server.close() }
        client.close()
        client.close()
        client.shutdownWrite()
        guard case .closed = netError({ try client.read(maxCount: 1, deadline: nil) }),
              case .closed = netError({ try client.write([1]) }) else {
            Issue.record("read or write after close did not throw closed")
            return
        }
    }

    @Test func writingToAPeerThatClosedThrowsClosed() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close() }
        server.close()
        // The first writes may still be accepted by the kernel; once the peer's reset
        // arrives, a write must throw `.closed` (and SIGPIPE must not kill the process).
        let chunk = [UInt8](repeating: 7, count: 64 * 1024)
        var error: NetError?
        for _ in 0..<1_000 {
            error = netError { try client.write(chunk) }
            if error != nil { break }
            Thread.sleep(forTimeInterval: 0.005)
        }
        guard case .closed = error else {
            Issue.record("expected closed, got \(String(describing: error))")
            return
        }
    }

    @Test func concurrentWritersNeverInterleave() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close(); server.close() }
        let blockSize = 300_000
        let writers = (0..<4).map { id in
            Background {
                for _ in 0..<5 { try client.write([UInt8](repeating: UInt8(id), count: blockSize)) }
            }
        }
        let reader = Background { try readAll(server) }
        for writer in writers { try writer.join() }
        client.shutdownWrite()
        let all = try reader.join()
        #expect(all.count == 4 * 5 * blockSize)
        for start in stride(from: 0, to: all.count, by: blockSize) {
            let block = all[start..<start + blockSize]
            #expect(block.allSatisfy { $0 == block.first }, "block at \(start) mixes writers")
        }
    }

    @Test func reportsAddressesAndPorts() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close(); server.close() }
        #expect(listener.port != 0)
        #expect(listener.host == "127.0.0.1")
        #expect(listener.localDescription == "127.0.0.1:\(listener.port)")
        #expect(client.remoteHost == "127.0.0.1")
        #expect(client.remotePort == listener.port)
        #expect(client.remoteDescription == "127.0.0.1:\(listener.port)")
        #expect(server.localPort == listener.port)
        #expect(server.remotePort == client.localPort)
        #expect(server.remoteDescription == "127.0.0.1:\(client.localPort)")
    }

    @Test func connectsToLocalhostByName() throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        let accepted = Background { try listener.accept() }
        let client = try TCPConnection.connect(to: HostPort(host: "localhost", port: listener.port), timeout: .seconds(10))
        defer { client.close() }
        let server = try accepted.join()
        defer { server.close() }
        try client.writeLine("hi")
        var lines = LineReader(server)
        #expect(try lines.readLine(deadline: .now + .seconds(10)) == "hi")
    }

    @Test func worksOverIPv6Loopback() throws {
        let listener: TCPListener
        do {
            listener = try TCPListener(host: "::1", port: 0)
        } catch {
            print("skipping: no IPv6 loopback here (\(error))")
            return
        }
        defer { listener.close() }
        let accepted = Background { try listener.accept() }
        let client = try TCPConnection.connect(host: "::1", port: listener.port, timeout: .seconds(10))
        defer { client.close() }
        let server = try accepted.join()
        defer { server.close() }
        #expect(listener.localDescription == "[::1]:\(listener.port)")
        #expect(client.remoteDescription == "[::1]:\(listener.port)")
        #expect(server.remoteHost == "::1")
        try client.write([1, 2, 3])
        #expect(try server.read(maxCount: 10, deadline: .now + .seconds(10)) == [1, 2, 3])
    }

    @Test func connectingToAClosedPortIsUnreachable() throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        let port = listener.port
        listener.close()
        let error = netError { try TCPConnection.connect(host: "127.0.0.1", port: port, timeout: .seconds(10)) }
        guard case let .unreachable(address, reason) = error else {
            Issue.record("expected unreachable, got \(String(describing: error))")
            return
        }
        #expect(address == "127.0.0.1:\(port)")
        #expect(reason.contains("refused"))
        #expect(error!.description.hasPrefix("cannot reach 127.0.0.1:\(port): connection refused"))
    }

    @Test func connectingToPortZeroOrAnEmptyHostIsInvalid() {
        guard case .invalidAddress = netError({ try TCPConnection.connect(host: "127.0.0.1", port: 0, timeout: .seconds(1)) }),
              case .invalidAddress = netError({ try TCPConnection.connect(host: "", port: 1, timeout: .seconds(1)) }) else {
            Issue.record("expected invalidAddress")
            return
        }
    }

    @Test func aSecondListenerOnTheSamePortIsRefused() throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        let error = netError { try TCPListener(host: "127.0.0.1", port: listener.port) }
        guard case let .system(operation, reason) = error else {
            Issue.record("expected a system error, got \(String(describing: error))")
            return
        }
        #expect(operation == "listen on 127.0.0.1:\(listener.port)")
        #expect(reason == "the port is already in use")
    }

    @Test func connectTimesOutWhenTheListenQueueIsFull() throws {
        // A listener that never accepts, with the smallest queue: once the queue is full
        // the kernel drops new SYNs, so a connection attempt gets no answer.
        let listener = try TCPListener(host: "127.0.0.1", port: 0, backlog: 0)
        defer { listener.close() }
        var held: [TCPConnection] = []
        defer { held.forEach { $0.close() } }
        var failure: NetError?
        for _ in 0..<20 {
            do {
                held.append(try TCPConnection.connect(host: "127.0.0.1", port: listener.port, timeout: .milliseconds(300)))
            } catch {
                failure = error
                break
            }
        }
        guard let error = failure else {
            print("skipping: this kernel never fills a listen queue")
            return
        }
        guard case .timedOut = error else {
            Issue.record("expected timedOut, got \(error)")
            return
        }
    }
}

/// The daemon's default listen address `[::]` is dual stack: IPv4 and IPv6 clients both
/// reach it (IPV6_V6ONLY off, whatever the system default), and each is shown in its own
/// form.
struct DualStackListenerTests {
    @Test func ipv6WildcardAcceptsBothFamilies() throws {
        let listener = try TCPListener(host: "::", port: 0)
        defer { listener.close() }
        #expect(listener.host == "::")
        for (host, shown) in [("127.0.0.1", "127.0.0.1"), ("::1", "::1")] {
            let client = try TCPConnection.connect(host: host, port: listener.port, timeout: .seconds(5))
            defer { client.close() }
            let accepted = try listener.accept()
            defer { accepted.close() }
            #expect(accepted.remoteHost == shown)
        }
    }
}

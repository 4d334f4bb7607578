import Foundation
import PeerNet
import Testing

/// `close()` racing with readers and writers on other threads: every thread must come
/// back (end of stream or `.closed`), never hang, crash, or touch a reused descriptor.
@Suite struct CloseRaceTests {
    @Test func closeRacingReadersAndWriters() throws {
        for round in 0..<200 {
            let (a, b) = try socketPair()
            let reader = Background { () -> Int in
                var total = 0
                while true {
                    do {
                        let bytes = try a.read(maxCount: 4096, deadline: nil)
                        if bytes.isEmpty { return total }
                        total += bytes.count
                    } catch NetError.closed {
                        return total
                    }
                }
            }
            let writer = Background { () -> Bool in
                let chunk = [UInt8](repeating: UInt8(truncatingIfNeeded: round), count: 8192)
                while true {
                    do { try a.write(chunk) } catch NetError.closed { return true }
                }
            }
            let drain = Background { _ = try? readAll(b) }
            if round % 2 == 0 { Thread.sleep(forTimeInterval: 0.001) }
            a.close()
            _ = try reader.join(within: 20)
            #expect(try writer.join(within: 20))
            b.close()
            try drain.join(within: 20)
        }
    }

    @Test func manyConcurrentTCPConnections() throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        let server = Background { () -> Int in
            var handlers: [Background<Void>] = []
            while true {
                let connection: TCPConnection
                do { connection = try listener.accept() } catch NetError.closed { break }
                handlers.append(Background {
                    defer { connection.close() }
                    var lines = LineReader(connection)
                    while let line = try lines.readLine(deadline: .now + .seconds(30)) {
                        try connection.writeLine(line.uppercased())
                    }
                })
            }
            for handler in handlers { try handler.join() }
            return handlers.count
        }
        let clients = (0..<32).map { n in
            Background { () -> String? in
                let connection = try TCPConnection.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(10))
                defer { connection.close() }
                try connection.writeLine("client \(n)")
                var lines = LineReader(connection)
                return try lines.readLine(deadline: .now + .seconds(30))
            }
        }
        for (n, client) in clients.enumerated() {
            #expect(try client.join() == "CLIENT \(n)")
        }
        listener.close()
        #expect(try server.join() == 32)
    }
}

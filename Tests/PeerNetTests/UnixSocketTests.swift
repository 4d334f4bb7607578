import Foundation
import Glibc
import PeerNet
import Testing

/// Unix-domain sockets, each in a private temporary directory.
@Suite struct UnixSocketTests {
    @Test func roundTrip() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/control.sock"
            let listener = try UnixListener(path: path)
            defer { listener.close() }
            let served = Background {
                let connection = try listener.accept()
                defer { connection.close() }
                var lines = LineReader(connection)
                while let line = try lines.readLine() {
                    try connection.writeLine("echo: " + line)
                }
                return connection.remoteDescription
            }
            let client = try UnixConnection.connect(path: path)
            defer { client.close() }
            #expect(client.remoteDescription == path)
            try client.writeLine("{\"cmd\":\"status\"}")
            try client.writeLine("second")
            client.shutdownWrite()
            var replies = LineReader(client)
            #expect(try replies.readLine(deadline: .now + .seconds(10)) == "echo: {\"cmd\":\"status\"}")
            #expect(try replies.readLine(deadline: .now + .seconds(10)) == "echo: second")
            #expect(try replies.readLine(deadline: .now + .seconds(10)) == nil)
            #expect(try served.join() == path)
        }
    }

    @Test func socketFileIsPrivateAndRemovedOnClose() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/control.sock"
            let oldMask = umask(0)  // the mode must not depend on the umask
            defer { umask(oldMask) }
            let listener = try UnixListener(path: path)
            var info = stat()
            #expect(lstat(path, &info) == 0)
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            #expect(info.st_mode & 0o777 == 0o600)
            listener.close()
            listener.close()
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func aSecondListenerOnALivePathIsRefused() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/control.sock"
            let first = try UnixListener(path: path)
            defer { first.close() }
            let error = netError { try UnixListener(path: path) }
            guard case let .system(_, reason) = error else {
                Issue.record("expected a system error, got \(String(describing: error))")
                return
            }
            #expect(reason == "another process is listening on \(path)")
            // The first listener still works.
            let accepted = Background { try listener(first) }
            let client = try UnixConnection.connect(path: path)
            defer { client.close() }
            try client.write([9])
            #expect(try accepted.join() == [9])
        }
    }

    /// The first non-empty read from the next connections. The second listener's liveness
    /// probe is itself a connection, which the live listener sees as empty.
    private func listener(_ listener: UnixListener) throws -> [UInt8] {
        while true {
            let connection = try listener.accept()
            defer { connection.close() }
            let bytes = try connection.read(maxCount: 10, deadline: .now + .seconds(10))
            if !bytes.isEmpty { return bytes }
        }
    }

    @Test func aStaleSocketFileIsReplaced() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/control.sock"
            // What a killed daemon leaves behind: a bound socket file nobody listens on.
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            #expect(fd >= 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            #expect(bound == 0)
            #expect(listen(fd, 1) == 0)
            close(fd)
            #expect(FileManager.default.fileExists(atPath: path))

            let listener = try UnixListener(path: path)
            defer { listener.close() }
            let accepted = Background { try listener.accept().read(maxCount: 10, deadline: .now + .seconds(10)) }
            let client = try UnixConnection.connect(path: path)
            defer { client.close() }
            try client.write([1, 2])
            #expect(try accepted.join() == [1, 2])
        }
    }

    @Test func aFileThatIsNotASocketIsNeverDeleted() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/notes.txt"
            try "keep me".write(toFile: path, atomically: false, encoding: .utf8)
            let error = netError { try UnixListener(path: path) }
            guard case let .system(_, reason) = error else {
                Issue.record("expected a system error, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("not a socket"))
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
        }
    }

    @Test func anOverlongPathIsRefused() throws {
        let path = "/tmp/" + String(repeating: "x", count: 103)  // 108 bytes
        for attempt in [{ _ = try UnixListener(path: path) }, { _ = try UnixConnection.connect(path: path) }] {
            guard case let .invalidAddress(message) = netError(attempt) else {
                Issue.record("expected invalidAddress")
                continue
            }
            #expect(message.contains("108 bytes, over the limit of 107"))
        }
        // 107 bytes is fine (nothing listens there, so connecting is unreachable).
        let longest = "/tmp/" + String(repeating: "y", count: 102)
        guard case .unreachable = netError({ try UnixConnection.connect(path: longest) }) else {
            Issue.record("expected unreachable for a 107-byte path")
            return
        }
    }

    @Test func connectingToAMissingPathIsUnreachable() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/absent.sock"
            let error = netError { try UnixConnection.connect(path: path) }
            guard case let .unreachable(address, reason) = error else {
                Issue.record("expected unreachable, got \(String(describing: error))")
                return
            }
            #expect(address == path)
            #expect(reason.contains("no socket at this path"))
        }
    }

    @Test func closeWakesABlockedAccept() throws {
        try withTemporaryDirectory { dir in
            let listener = try UnixListener(path: dir + "/control.sock")
            let acceptor = Background { () -> NetError? in netError { try listener.accept() } }
            Thread.sleep(forTimeInterval: 0.2)
            listener.close()
            guard case .closed = try acceptor.join(within: 10) else {
                Issue.record("accept was not woken with closed")
                return
            }
        }
    }

    @Test func socketPairCarriesBytesAndEndOfStream() throws {
        let (a, b) = try socketPair()
        defer { a.close(); b.close() }
        let payload = patternBytes(3 << 20)
        let reader = Background { try readAll(b) }
        try a.write(payload)
        a.shutdownWrite()
        #expect(try reader.join() == payload)
        try b.write([5])
        #expect(try a.read(maxCount: 4, deadline: .now + .seconds(10)) == [5])
        guard case .timedOut = netError({ try a.read(maxCount: 4, deadline: .now + .milliseconds(50)) }) else {
            Issue.record("expected timedOut on a silent pair")
            return
        }
        #expect(a.remoteDescription == "socketpair")
    }

    @Test func closeWakesABlockedReaderOnASocketPair() throws {
        let (a, b) = try socketPair()
        defer { b.close() }
        let reader = Background { () -> String in
            do {
                return try a.read(maxCount: 10, deadline: nil).isEmpty ? "end" : "data"
            } catch NetError.closed {
                return "closed"
            }
        }
        Thread.sleep(forTimeInterval: 0.2)
        a.close()
        let outcome = try reader.join(within: 10)
        #expect(outcome == "end" || outcome == "closed")
    }
}

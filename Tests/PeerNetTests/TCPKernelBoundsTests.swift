import Glibc
@testable import PeerNet
import Testing

/// What the kernel may hold for a peer stays bounded although the socket buffers are
/// autotuned: both ends of a connection, dialled and accepted, carry the limits.
@Suite struct TCPKernelBoundsTests {
    static func option(_ connection: TCPConnection, _ name: Int32) throws -> Int32 {
        try connection.socket.withFD("test") { fd in
            var value: Int32 = -1
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, Int32(IPPROTO_TCP), name, &value, &length)
            return value
        }
    }

    /// The receive window scale negotiated in the handshake (`tcpi_rcv_wscale`, the high
    /// four bits of `struct tcp_info`'s seventh byte).
    static func receiveWindowScale(_ connection: TCPConnection) throws -> Int {
        try connection.socket.withFD("test") { fd in
            var info = [UInt8](repeating: 0, count: 256)
            var length = socklen_t(info.count)
            _ = getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &length)
            return Int(info[6] >> 4)
        }
    }

    @Test func dialledAndAcceptedSocketsBoundUnsentBytesAndTheReceiveWindow() throws {
        let (listener, client, server) = try loopbackPair()
        defer { listener.close(); client.close(); server.close() }
        for (connection, name) in [(client, "dialled"), (server, "accepted")] {
            let unsent = try Self.option(connection, Int32(TCP_NOTSENT_LOWAT))
            #expect(unsent == TCPConnection.unsentLimit, "\(name): \(unsent)")
            #expect(try Self.option(connection, Int32(TCP_NODELAY)) == 1, "\(name)")
            // The scale was negotiated for a 4 MiB window: the largest window this end can
            // ever advertise, 65,535 << scale, is 8 MiB (scale 7). Autotuned without the
            // clamp it is 10 here (64 MiB, past tcp_rmem's 32 MiB).
            let scale = try Self.receiveWindowScale(connection)
            #expect(scale >= 1 && 65_535 << scale < 2 * Int(TCPConnection.windowLimit), "\(name): scale \(scale)")
        }
    }
}

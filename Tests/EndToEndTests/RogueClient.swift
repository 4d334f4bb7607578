import Foundation
import Glibc
import PeerCrypto
@testable import PeerNet
import PeerWire

/// A hostile peer written in the test: a fresh identity that speaks the real protocol
/// (TCP + the Noise handshake through `SecureChannel`) to a daemon on loopback, and then
/// sends whatever the test wants, including frames no honest node would send.
final class RogueClient: Sendable {
    let keyPair: KeyPair
    let channel: SecureChannel

    /// Connects to 127.0.0.1:`port` and completes the handshake as the initiator.
    init(port: UInt16, name: String = "rogue", listenPort: UInt16? = nil) throws {
        keyPair = KeyPair.generate()
        let stream = try TCPConnection.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        let hello = Hello(displayName: name, softwareVersion: "rogue 0.0.1", features: ["messages"], listenPort: listenPort)
        channel = try SecureChannel.initiate(over: stream, staticKey: keyPair, hello: hello, timeout: .seconds(5))
    }

    /// The next frame, waiting at most `seconds`.
    func receive(within seconds: Double = 5) throws -> Frame? {
        try channel.receive(deadline: .now + .milliseconds(Int(seconds * 1000)))
    }

    /// Reads until the daemon ends the connection (clean end of stream, reset or a
    /// channel error) and returns how it ended; nil if it is still open after `seconds`.
    /// Frames read on the way (pings) are ignored.
    func waitUntilClosed(within seconds: Double) -> String? {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            do throws(NetError) {
                guard try channel.receive(deadline: deadline) != nil else { return "end of stream" }
            } catch .timedOut {
                return nil
            } catch {
                return error.description
            }
        }
        return nil
    }

    func close() { channel.close() }
}

/// Raw, unencrypted TCP to a daemon: for clients that never finish a handshake.
final class RawClient: Sendable {
    let connection: TCPConnection

    init(port: UInt16) throws {
        connection = try TCPConnection.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
    }

    func write(_ bytes: [UInt8]) throws { try connection.write(bytes) }

    /// Waits for the server to end the connection: "end of stream", the error text of a
    /// reset, or nil if it is still open after `seconds`. Any bytes read are ignored.
    func waitUntilClosed(within seconds: Double) -> String? {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while true {
            do throws(NetError) {
                let bytes = try connection.read(maxCount: 4096, deadline: deadline)
                if bytes.isEmpty { return "end of stream" }
            } catch .timedOut {
                return nil
            } catch {
                return error.description
            }
        }
    }

    func close() { connection.close() }
}

/// Small helpers on event dictionaries.
extension Dictionary where Key == String, Value == Any {
    var peerName: String? { (self["peer"] as? [String: Any])?["name"] as? String }
    var peerID: String? { (self["peer"] as? [String: Any])?["id"] as? String }
    var reason: String { self["reason"] as? String ?? "" }
    var text: String? { self["text"] as? String }
}

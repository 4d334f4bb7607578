internal import FoundationEssentials
package import PeerCrypto
internal import PeerNet
internal import Synchronization

/// An established Transit connection: length-prefixed SecretBox records, each nonce a
/// big-endian counter that must arrive in order (magic-wormhole docs/transit.md).
///
///     record = length(4, big-endian) || nonce(24) || tag(16) || ciphertext
///
/// One thread sends and one receives (they may be two). Each side's counter (and the read
/// buffer) sits in a `Mutex` of its own; no lock is held across a read or a write.
package final class TransitConnection: Sendable {
    /// The largest record accepted from the peer (Python sends 16 KiB and 256 KiB records).
    package static let maxRecord = 4 << 20
    package let description: String
    private let stream: TCPConnection
    private let sendBox: SecretBox
    private let receiveBox: SecretBox
    private let sendNonce = Mutex<UInt64>(0)
    /// The receiving side: the next nonce expected and the bytes read past the last record.
    private struct Receiving {
        var nonce: UInt64 = 0
        var buffer: [UInt8]
    }
    private let receiving: Mutex<Receiving>

    init(stream: TCPConnection, sendKey: SecureBytes, receiveKey: SecureBytes, description: String, leftover: [UInt8]) throws {
        self.stream = stream
        self.sendBox = try SecretBox(key: sendKey)
        self.receiveBox = try SecretBox(key: receiveKey)
        self.description = description
        self.receiving = Mutex(Receiving(buffer: leftover))
    }

    static func nonce(_ counter: UInt64) -> [UInt8] {
        [UInt8](repeating: 0, count: 16) + (0..<8).reversed().map { UInt8(truncatingIfNeeded: counter >> (8 * UInt64($0))) }
    }

    package func send(_ record: [UInt8]) throws(WormholeError) {
        let counter = sendNonce.withLock { nonce in
            defer { nonce += 1 }
            return nonce
        }
        let sealed = sendBox.seal(record, nonce: Self.nonce(counter))
        let length = UInt32(sealed.count)
        do { try stream.write([UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + sealed) } catch {
            throw .transfer("transit: \(error)")
        }
    }

    /// The next record; throws for a record over `maxRecord`, out of order or not authentic.
    package func receive(deadline: ContinuousClock.Instant?) throws(WormholeError) -> [UInt8] {
        let header = try read(4, deadline: deadline)
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length >= SecretBox.overhead, length <= Self.maxRecord + SecretBox.overhead else {
            throw .protocolViolation("transit record of \(length) bytes (limit \(Self.maxRecord))")
        }
        let sealed = try read(length, deadline: deadline)
        let inOrder = receiving.withLock { state in
            guard Array(sealed[0..<SecretBox.nonceLength]) == Self.nonce(state.nonce) else { return false }
            state.nonce += 1
            return true
        }
        guard inOrder else { throw .protocolViolation("transit record out of order") }
        do { return try receiveBox.open(sealed) } catch { throw .protocolViolation("transit record did not decrypt") }
    }

    private func read(_ count: Int, deadline: ContinuousClock.Instant?) throws(WormholeError) -> [UInt8] {
        while true {
            let out: [UInt8]?, missing: Int
            (out, missing) = receiving.withLock { state in
                guard state.buffer.count >= count else { return (nil, count - state.buffer.count) }
                defer { state.buffer.removeSubrange(0..<count) }
                return (Array(state.buffer[0..<count]), 0)
            }
            if let out { return out }
            let more: [UInt8]
            do { more = try stream.read(maxCount: max(65536, missing), deadline: deadline) } catch {
                throw .transfer("transit: \(error)")
            }
            guard !more.isEmpty else { throw .transfer("the transit connection closed early") }
            receiving.withLock { $0.buffer += more }
        }
    }

    package func close() { stream.close() }
}

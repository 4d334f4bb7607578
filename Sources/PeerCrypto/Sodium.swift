/// PeerCrypto: libsodium behind one module — secret types, X25519 identity keys, device IDs,
/// BLAKE2b hashing, ChaCha20-Poly1305 and the Noise Protocol Framework.
/// No other module imports CSodium, and no C pointer appears in a public signature.
internal import CSodium

/// Initialises libsodium exactly once, before any primitive is used.
enum Sodium {
    /// `sodium_init` is thread-safe and idempotent; evaluating this global runs it once.
    static let initialised: Bool = sodium_init() >= 0

    @inline(__always)
    static func ensure() {
        precondition(initialised, "libsodium failed to initialise")
    }

    /// Fills `count` bytes with cryptographically secure randomness.
    static func randomBytes(_ count: Int) -> [UInt8] {
        ensure()
        var out = [UInt8](repeating: 0, count: count)
        if count > 0 { out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) } }
        return out
    }
}

/// Cryptographically secure random bytes (libsodium's `randombytes_buf`).
package func secureRandomBytes(_ count: Int) -> [UInt8] {
    Sodium.randomBytes(count)
}

/// Compares two byte sequences in constant time for equal lengths (a length mismatch is
/// not secret and returns false at once).
package func constantTimeEqual(_ a: some ContiguousBytes, _ b: some ContiguousBytes) -> Bool {
    Sodium.ensure()
    return a.withUnsafeBytes { pa in
        b.withUnsafeBytes { pb in
            pa.count == pb.count && (pa.count == 0 || sodium_memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0)
        }
    }
}

/// Contiguous bytes that can be read without copying ([UInt8], ArraySlice, SecureBytes).
package protocol ContiguousBytes {
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ContiguousBytes where Element == UInt8 {}
extension ArraySlice: ContiguousBytes where Element == UInt8 {}

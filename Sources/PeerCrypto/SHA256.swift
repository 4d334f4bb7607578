internal import COpenSSL

/// SHA-256 (FIPS 180-4) through OpenSSL libcrypto, which uses the SHA extensions (SHA-NI)
/// where the CPU has them. Noise's `SHA256` hash function (HASHLEN 32, BLOCKLEN 64).
package enum SHA256 {
    package static let digestLength = 32
    package static let blockLength = 64

    /// Digest of one input.
    package static func hash(_ data: some ContiguousBytes) -> [UInt8] {
        var hasher = Hasher()
        hasher.update(data)
        return hasher.finalize()
    }

    /// Digest of several inputs, in order, as if concatenated (no copy is made).
    package static func hash(parts: [any ContiguousBytes]) -> [UInt8] {
        var hasher = Hasher()
        for part in parts { hasher.update(part) }
        return hasher.finalize()
    }

    /// Digest of `data` written at `out` (32 bytes): one call into libcrypto, no context
    /// kept, no allocation here (for hashing many chunks).
    package static func hash(_ data: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer) {
        var length: UInt32 = 0
        let ok = EVP_Digest(data.baseAddress ?? UnsafeRawPointer(out), data.count,
                            out.assumingMemoryBound(to: UInt8.self), &length, EVP_sha256(), nil) == 1
        precondition(ok && length == UInt32(digestLength), "SHA-256 failed")
    }

    /// Streaming SHA-256; the OpenSSL context lives in a class owned by this value type,
    /// copied on write.
    package struct Hasher: Sendable {
        private var state = State()

        package init() {}

        package mutating func update(_ data: some ContiguousBytes) {
            data.withUnsafeBytes { update($0) }
        }

        /// Absorbs bytes from a raw buffer (for hot loops that already hold one).
        package mutating func update(_ buffer: UnsafeRawBufferPointer) {
            if !isKnownUniquelyReferenced(&state) { state = state.copy() }
            if buffer.count > 0 {
                precondition(EVP_DigestUpdate(state.context, buffer.baseAddress!, buffer.count) == 1, "SHA-256 update failed")
            }
        }

        /// The 32-byte digest. The hasher may not be updated afterwards.
        package mutating func finalize() -> [UInt8] {
            if !isKnownUniquelyReferenced(&state) { state = state.copy() }
            var out = [UInt8](repeating: 0, count: SHA256.digestLength)
            var length: UInt32 = 0
            let ok = out.withUnsafeMutableBytes { EVP_DigestFinal_ex(state.context, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), &length) == 1 }
            precondition(ok && length == UInt32(SHA256.digestLength), "SHA-256 final failed")
            return out
        }
    }

    /// Owner of one `EVP_MD_CTX`.
    final class State: @unchecked Sendable {
        // @unchecked: only reached through Hasher, which copies before mutating a shared
        // state (copy on write), so no two threads ever write the same context.
        let context: OpaquePointer

        init() {
            guard let context = EVP_MD_CTX_new() else { fatalError("OpenSSL could not allocate a digest context (out of memory)") }
            self.context = context
            precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "SHA-256 init failed")
        }

        private init(copying other: State) {
            guard let context = EVP_MD_CTX_new() else { fatalError("OpenSSL could not allocate a digest context (out of memory)") }
            self.context = context
            precondition(EVP_MD_CTX_copy_ex(context, other.context) == 1, "SHA-256 copy failed")
        }

        func copy() -> State { State(copying: self) }

        deinit { EVP_MD_CTX_free(context) }
    }
}

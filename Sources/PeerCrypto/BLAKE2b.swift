internal import CSodium

/// BLAKE2b (RFC 7693) through libsodium: one-shot and streaming, 1–64 byte digests,
/// optional key of up to 64 bytes. Content hashes (chunks, manifests, device IDs) use
/// the 32-byte digest; Noise uses the 64-byte one.
package enum BLAKE2b {
    package static let maxDigestLength = 64
    package static let maxKeyLength = 64
    package static let blockLength = 128

    /// Digest of one input, in one call (no streaming state to allocate: a temporary
    /// file's name hashes its path, B: 10,000 names).
    package static func hash(_ data: some ContiguousBytes, length: Int = 32) -> [UInt8] {
        precondition((1...maxDigestLength).contains(length), "BLAKE2b digest length must be 1...64")
        Sodium.ensure()
        return [UInt8](unsafeUninitializedCapacity: length) { out, count in
            data.withUnsafeBytes { d in
                _ = crypto_generichash(out.baseAddress!, length, d.bindMemory(to: UInt8.self).baseAddress, UInt64(d.count), nil, 0)
            }
            count = length
        }
    }

    /// Digest of several inputs, in order, as if concatenated (no copy is made).
    package static func hash(parts: [any ContiguousBytes], length: Int = 32, key: (any ContiguousBytes)? = nil) -> [UInt8] {
        var hasher = Hasher(length: length, key: key)
        for part in parts { hasher.update(part) }
        return hasher.finalize()
    }

    /// Streaming BLAKE2b. `crypto_generichash_state` needs 64-byte alignment, which
    /// Swift cannot express for the imported struct, so the state lives in an aligned
    /// raw allocation owned by a class (wiped when freed) and the value type copies it on
    /// write.
    package struct Hasher: Sendable {
        private var state: State
        private let length: Int

        /// - Parameters:
        ///   - length: digest length, 1…64 bytes.
        ///   - key: optional key, 0…64 bytes (keyed BLAKE2b, a MAC).
        package init(length: Int = 32, key: (any ContiguousBytes)? = nil) {
            precondition((1...BLAKE2b.maxDigestLength).contains(length), "BLAKE2b digest length must be 1...64")
            Sodium.ensure()
            self.length = length
            state = State()
            let s = state.pointer
            if let key {
                key.withUnsafeBytes { k in
                    precondition(k.count <= BLAKE2b.maxKeyLength, "BLAKE2b key is at most 64 bytes")
                    _ = crypto_generichash_init(s, k.bindMemory(to: UInt8.self).baseAddress, k.count, length)
                }
            } else {
                _ = crypto_generichash_init(s, nil, 0, length)
            }
        }

        /// Absorbs bytes.
        package mutating func update(_ data: some ContiguousBytes) {
            if !isKnownUniquelyReferenced(&state) { state = state.copy() }
            let s = state.pointer
            data.withUnsafeBytes { d in
                if d.count > 0 {
                    _ = crypto_generichash_update(s, d.bindMemory(to: UInt8.self).baseAddress, UInt64(d.count))
                }
            }
        }

        /// Absorbs bytes from a raw buffer (for hot loops that already hold one).
        package mutating func update(_ buffer: UnsafeRawBufferPointer) {
            if !isKnownUniquelyReferenced(&state) { state = state.copy() }
            if buffer.count > 0 {
                _ = crypto_generichash_update(state.pointer, buffer.bindMemory(to: UInt8.self).baseAddress, UInt64(buffer.count))
            }
        }

        /// The digest. The hasher may not be updated afterwards (libsodium wipes the state).
        package mutating func finalize() -> [UInt8] {
            if !isKnownUniquelyReferenced(&state) { state = state.copy() }
            var out = [UInt8](repeating: 0, count: length)
            let s = state.pointer
            out.withUnsafeMutableBytes { o in
                _ = crypto_generichash_final(s, o.bindMemory(to: UInt8.self).baseAddress!, length)
            }
            return out
        }
    }

    /// Owner of one aligned `crypto_generichash_state`.
    final class State: @unchecked Sendable {
        // @unchecked: only reached through Hasher, which copies before mutating a shared
        // state (copy on write), so no two threads ever write the same memory.
        let raw: UnsafeMutableRawPointer
        let size: Int

        init() {
            size = crypto_generichash_statebytes()
            raw = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
            raw.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        }

        var pointer: OpaquePointer { OpaquePointer(raw) }

        func copy() -> State {
            let other = State()
            other.raw.copyMemory(from: raw, byteCount: size)
            return other
        }

        deinit {
            sodium_memzero(raw, size)
            raw.deallocate()
        }
    }
}

internal import CSodium

/// Secret bytes: fixed length, held in memory that is wiped when freed, compared in
/// constant time, never printed. Immutable after creation, hence `Sendable`.
package final class SecureBytes: @unchecked Sendable, ContiguousBytes {
    // @unchecked: the buffer is written only in init and wiped only in deinit, when no
    // other reference exists; between the two it is read-only.
    private let storage: UnsafeMutableRawBufferPointer

    /// The number of bytes held.
    package var count: Int { storage.count }

    /// Copies `bytes` into wiped-on-free memory. The caller should wipe its own copy.
    package init(_ bytes: some ContiguousBytes) {
        Sodium.ensure()
        storage = bytes.withUnsafeBytes { src in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(src.count, 1), alignment: 16)
            if src.count > 0 { buffer.baseAddress!.copyMemory(from: src.baseAddress!, byteCount: src.count) }
            return UnsafeMutableRawBufferPointer(rebasing: buffer[0..<src.count])
        }
        if storage.count > 0 { sodium_mlock(storage.baseAddress!, storage.count) }
    }

    /// Creates `count` bytes filled by `body` (the memory never exists outside this object).
    package init(count: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        Sodium.ensure()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        let view = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
        view.initializeMemory(as: UInt8.self, repeating: 0)
        do { try body(view) } catch {
            sodium_memzero(buffer.baseAddress!, buffer.count)
            buffer.deallocate()
            throw error
        }
        storage = view
        if count > 0 { sodium_mlock(storage.baseAddress!, storage.count) }
    }

    /// `count` random bytes.
    package static func random(count: Int) -> SecureBytes {
        SecureBytes(count: count) { if $0.count > 0 { randombytes_buf($0.baseAddress!, $0.count) } }
    }

    deinit {
        if storage.count > 0 {
            sodium_munlock(storage.baseAddress!, storage.count)  // also zeroes the memory
            sodium_memzero(storage.baseAddress!, storage.count)
        }
        storage.deallocate()
    }

    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage))
    }

    /// A plain copy of the secret, for code that must hand it to an API expecting an array
    /// (tests and key files). Wipe the copy after use with `wipe(_:)`.
    package func unsafeCopy() -> [UInt8] {
        [UInt8](UnsafeRawBufferPointer(storage))
    }
}

extension SecureBytes: Equatable {
    /// Constant-time equality.
    package static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        constantTimeEqual(lhs, rhs)
    }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible {
    package var description: String { "SecureBytes(\(count) bytes, redacted)" }
    package var debugDescription: String { description }
}

/// Overwrites an array's bytes with zeros in a way the compiler cannot remove.
package func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buffer in
        if buffer.count > 0 { sodium_memzero(buffer.baseAddress!, buffer.count) }
    }
}

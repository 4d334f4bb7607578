internal import CSodium

/// The prime-order subgroup of Ed25519 as python-spake2 uses it, over libsodium's
/// `crypto_core_ed25519_*` and `crypto_scalarmult_ed25519_*_noclamp` operations.
///
/// Elements are 32-byte canonical encodings; scalars are 32 bytes little-endian, reduced
/// modulo the group order L.
enum Ed25519Group {
    typealias Element = [UInt8]

    /// The encoding of the neutral element (x = 0, y = 1).
    static let identity: Element = [1] + [UInt8](repeating: 0, count: 31)

    /// A scalar from bytes read as a big-endian number (any length up to 64), reduced mod L.
    static func scalar(bigEndian bytes: [UInt8]) -> SecureBytes {
        precondition(bytes.count <= 64)
        var wide = [UInt8](bytes.reversed()) + [UInt8](repeating: 0, count: 64 - bytes.count)
        defer { wipe(&wide) }
        return SecureBytes(count: 32) { out in
            crypto_core_ed25519_scalar_reduce(out.baseAddress!.assumingMemoryBound(to: UInt8.self), wide)
        }
    }

    /// A uniformly random scalar in [0, L).
    static func randomScalar() -> SecureBytes {
        Sodium.ensure()
        return SecureBytes(count: 32) { crypto_core_ed25519_scalar_random($0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
    }

    /// -s mod L.
    static func negate(_ s: SecureBytes) -> SecureBytes {
        SecureBytes(count: 32) { out in
            s.withUnsafeBytes { crypto_core_ed25519_scalar_negate(out.baseAddress!.assumingMemoryBound(to: UInt8.self), $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
    }

    /// s·B; nil when s is zero mod L.
    static func baseMultiply(_ s: SecureBytes) -> Element? {
        var out = [UInt8](repeating: 0, count: 32)
        let rc = s.withUnsafeBytes { crypto_scalarmult_ed25519_base_noclamp(&out, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        return rc == 0 ? out : nil
    }

    /// s·P for P in the prime-order subgroup; nil when P is not, or the result is the identity.
    static func multiply(_ p: Element, by s: SecureBytes) -> Element? {
        var out = [UInt8](repeating: 0, count: 32)
        let rc = s.withUnsafeBytes { crypto_scalarmult_ed25519_noclamp(&out, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), p) }
        return rc == 0 ? out : nil
    }

    /// P + Q for any points on the curve; nil when either is not on the curve.
    static func add(_ p: Element, _ q: Element) -> Element? {
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_core_ed25519_add(&out, p, q) == 0 ? out : nil
    }

    /// True for a canonical encoding of a point of the prime-order subgroup other than the
    /// identity (python-spake2's `bytes_to_element`, which also refuses small orders).
    static func isValidElement(_ p: Element) -> Bool {
        p.count == 32 && crypto_core_ed25519_is_valid_point(p) == 1
    }

    /// python-spake2's `arbitrary_element(seed)`: a point nobody knows the logarithm of.
    ///
    /// y = HKDF-SHA256(ikm: seed, info: "SPAKE2 arbitrary element", 48 bytes) read big-endian
    /// mod p; the first y, y+1, … that lies on the curve (with the even x) is multiplied by
    /// the cofactor 8 into the prime-order subgroup, skipping the eight small-order points.
    static func arbitraryElement(seed: [UInt8]) -> Element {
        let expanded = HKDFSHA256.derive(inputKeyMaterial: seed, info: Array("SPAKE2 arbitrary element".utf8), length: 48)
        var y = FieldNumber(bigEndian: expanded.unsafeCopy())
        while true {
            let encoded = y.littleEndianBytes  // top bit 0: the even x, as xrecover picks
            if let p2 = add(encoded, encoded), let p4 = add(p2, p2), let p8 = add(p4, p4), p8 != identity {
                return p8
            }
            y.increment()
        }
    }
}

/// A number modulo p = 2^255 - 19, only as far as `arbitraryElement` needs: reduction of a
/// 384-bit big-endian value and adding one.
struct FieldNumber {
    /// Little-endian 64-bit limbs, value < p after init.
    private var limbs: [UInt64]

    private static let p: [UInt64] = [0xFFFF_FFFF_FFFF_FFED, .max, .max, 0x7FFF_FFFF_FFFF_FFFF]

    init(bigEndian bytes: [UInt8]) {
        precondition(bytes.count <= 48)
        var l = [UInt64](repeating: 0, count: 6)
        for (i, byte) in bytes.reversed().enumerated() { l[i / 8] |= UInt64(byte) << (8 * UInt64(i % 8)) }
        // Fold: x = hi·2^255 + lo ≡ lo + 19·hi (mod p), twice brings x below 2^256 then ~p.
        for _ in 0..<3 {
            var hi = [UInt64](repeating: 0, count: 3)  // x >> 255, at most 129 bits
            for i in 0..<3 { hi[i] = (l[3 + i] >> 63) | (i < 2 ? l[4 + i] << 1 : 0) }
            var lo = Array(l[0..<4]); lo[3] &= 0x7FFF_FFFF_FFFF_FFFF
            var carry: UInt64 = 0
            for i in 0..<6 {
                let product = (i < 3 ? hi[i] : 0).multipliedFullWidth(by: 19)
                let (s1, o1) = (i < 4 ? lo[i] : 0).addingReportingOverflow(product.low)
                let (s2, o2) = s1.addingReportingOverflow(carry)
                l[i] = s2
                carry = product.high + (o1 ? 1 : 0) + (o2 ? 1 : 0)
            }
        }
        limbs = Array(l[0..<4])
        if !Self.lessThanP(limbs) { limbs = Self.subtractP(limbs) }
    }

    var littleEndianBytes: [UInt8] {
        (0..<32).map { UInt8(truncatingIfNeeded: limbs[$0 / 8] >> (8 * UInt64($0 % 8))) }
    }

    mutating func increment() {
        for i in 0..<4 {
            let (s, o) = limbs[i].addingReportingOverflow(1)
            limbs[i] = s
            if !o { break }
        }
        if !Self.lessThanP(limbs) { limbs = Self.subtractP(limbs) }
    }

    private static func lessThanP(_ x: [UInt64]) -> Bool {
        for i in stride(from: 3, through: 0, by: -1) where x[i] != p[i] { return x[i] < p[i] }
        return false
    }

    private static func subtractP(_ x: [UInt64]) -> [UInt64] {
        var out = x
        var borrow: UInt64 = 0
        for i in 0..<4 {
            let (d1, b1) = x[i].subtractingReportingOverflow(p[i])
            let (d2, b2) = d1.subtractingReportingOverflow(borrow)
            out[i] = d2
            borrow = (b1 ? 1 : 0) + (b2 ? 1 : 0)
        }
        return out
    }
}

// BLAKE3's compression function over SIMD lanes: one 32-bit word of each of N independent
// inputs per vector lane (the parallel form of the BLAKE3 paper, section 5.3). Generic and
// @inlinable so that each width is specialized, and compiled, in the module that calls it:
// PeerCrypto for the plain x86-64 build (4 lanes), BLAKE3AVX2 and BLAKE3AVX512 for wider
// vectors with those modules' CPU features (PeerCrypto picks one by the CPU at run time).
// No dependency; PeerCrypto's BLAKE3 holds the tree and the API.

/// A word BLAKE3's G function can work on: one `UInt32`, or a vector of them.
public protocol BLAKE3Word {
    static func &+ (a: Self, b: Self) -> Self
    static func ^ (a: Self, b: Self) -> Self
    /// Rotation right by `n` (0 < n < 32) in each word.
    func rotated(right n: UInt32) -> Self
}

extension UInt32: BLAKE3Word {
    @inlinable @inline(__always)
    public func rotated(right n: UInt32) -> UInt32 { (self >> n) | (self << (32 - n)) }
}

/// A vector of `UInt32` lanes that can load one 64-byte message block of each lane.
public protocol BLAKE3Vector: SIMD, BLAKE3Word where Scalar == UInt32 {
    /// The two vectors of the even and of the odd lanes of `a` followed by `b`'s.
    static func unzip(_ a: Self, _ b: Self) -> (Self, Self)
}

extension BLAKE3Vector {
    // An add of the two disjoint halves, not an or: LLVM then keeps the vector form on
    // plain SSE2 too (an or is matched as a rotate that it scalarizes there). With AVX-512
    // it still becomes one vprold.
    @inlinable @inline(__always)
    public func rotated(right n: UInt32) -> Self {
        (self &>> Self(repeating: n)) &+ (self &<< Self(repeating: 32 - n))
    }
}

extension SIMD4: BLAKE3Word, BLAKE3Vector where Scalar == UInt32 {
    @inlinable @inline(__always)
    public static func unzip(_ a: Self, _ b: Self) -> (Self, Self) {
        (Self(lowHalf: a.evenHalf, highHalf: b.evenHalf), Self(lowHalf: a.oddHalf, highHalf: b.oddHalf))
    }
}

extension SIMD8: BLAKE3Word, BLAKE3Vector where Scalar == UInt32 {
    @inlinable @inline(__always)
    public static func unzip(_ a: Self, _ b: Self) -> (Self, Self) {
        (Self(lowHalf: a.evenHalf, highHalf: b.evenHalf), Self(lowHalf: a.oddHalf, highHalf: b.oddHalf))
    }
}

extension SIMD16: BLAKE3Word, BLAKE3Vector where Scalar == UInt32 {
    @inlinable @inline(__always)
    public static func unzip(_ a: Self, _ b: Self) -> (Self, Self) {
        (Self(lowHalf: a.evenHalf, highHalf: b.evenHalf), Self(lowHalf: a.oddHalf, highHalf: b.oddHalf))
    }
}

/// 16 words: a block's message, or the state of a compression (of one input, or of one per
/// lane).
public struct BLAKE3Words<W: BLAKE3Word> {
    public var w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15: W

    @inlinable @inline(__always)
    public init(_ w0: W, _ w1: W, _ w2: W, _ w3: W, _ w4: W, _ w5: W, _ w6: W, _ w7: W,
                _ w8: W, _ w9: W, _ w10: W, _ w11: W, _ w12: W, _ w13: W, _ w14: W, _ w15: W) {
        (self.w0, self.w1, self.w2, self.w3, self.w4, self.w5, self.w6, self.w7) = (w0, w1, w2, w3, w4, w5, w6, w7)
        (self.w8, self.w9, self.w10, self.w11, self.w12, self.w13, self.w14, self.w15) = (w8, w9, w10, w11, w12, w13, w14, w15)
    }

    /// The permutation applied to the message words between rounds.
    @inlinable @inline(__always)
    public var permuted: BLAKE3Words {
        BLAKE3Words(w2, w6, w3, w10, w7, w0, w4, w13, w1, w11, w12, w5, w9, w14, w15, w8)
    }

    @inlinable @inline(__always)
    static func g(_ a: inout W, _ b: inout W, _ c: inout W, _ d: inout W, _ x: W, _ y: W) {
        a = a &+ b &+ x; d = (d ^ a).rotated(right: 16)
        c = c &+ d; b = (b ^ c).rotated(right: 12)
        a = a &+ b &+ y; d = (d ^ a).rotated(right: 8)
        c = c &+ d; b = (b ^ c).rotated(right: 7)
    }

    @inlinable @inline(__always)
    mutating func round(_ m: BLAKE3Words<W>) {
        Self.g(&w0, &w4, &w8, &w12, m.w0, m.w1)
        Self.g(&w1, &w5, &w9, &w13, m.w2, m.w3)
        Self.g(&w2, &w6, &w10, &w14, m.w4, m.w5)
        Self.g(&w3, &w7, &w11, &w15, m.w6, m.w7)
        Self.g(&w0, &w5, &w10, &w15, m.w8, m.w9)
        Self.g(&w1, &w6, &w11, &w12, m.w10, m.w11)
        Self.g(&w2, &w7, &w8, &w13, m.w12, m.w13)
        Self.g(&w3, &w4, &w9, &w14, m.w14, m.w15)
    }

    /// The seven rounds of one compression of this state by `message`.
    @inlinable @inline(__always)
    public mutating func rounds(_ message: BLAKE3Words<W>) {
        var m = message
        round(m); m = m.permuted
        round(m); m = m.permuted
        round(m); m = m.permuted
        round(m); m = m.permuted
        round(m); m = m.permuted
        round(m); m = m.permuted
        round(m)
    }
}

/// Compresses `blocks` consecutive 64-byte blocks of each of `V.scalarCount` inputs at once
/// (input l starts at `p + l·stride`), chaining from `key` (8 words), with block counter
/// `counter + l·counterStep` for input l, every block's length 64, `flags` on every block,
/// `firstFlags` also on the first and `lastFlags` also on the last. Writes input l's 8-word
/// chaining value at `out + 8·l`.
@inlinable
public func blake3CompressLanes<V: BLAKE3Vector>(_: V.Type, _ p: UnsafeRawPointer, stride: Int, blocks: Int,
                                                 key: UnsafePointer<UInt32>, counter: UInt64, counterStep: UInt64,
                                                 flags: UInt32, firstFlags: UInt32, lastFlags: UInt32,
                                                 out: UnsafeMutablePointer<UInt32>) {
    let lanes = V.scalarCount
    var h0 = V(repeating: key[0]), h1 = V(repeating: key[1]), h2 = V(repeating: key[2]), h3 = V(repeating: key[3])
    var h4 = V(repeating: key[4]), h5 = V(repeating: key[5]), h6 = V(repeating: key[6]), h7 = V(repeating: key[7])
    var low = V(), high = V()
    for l in 0..<lanes {
        let c = counter &+ UInt64(l) &* counterStep
        low[l] = UInt32(truncatingIfNeeded: c)
        high[l] = UInt32(truncatingIfNeeded: c >> 32)
    }
    // The transpose's scratch, once per call: at 16 lanes it is over the 1 KiB that the
    // runtime puts on the stack, so each allocation is a malloc.
    withUnsafeTemporaryAllocation(of: V.self, capacity: 48) { scratch in
        for b in 0..<blocks {
            let m = blake3LoadBlocks(V.self, p + b &* 64, stride: stride, scratch: scratch)
            let f = flags | (b == 0 ? firstFlags : 0) | (b == blocks &- 1 ? lastFlags : 0)
            // Words 8 … 11 are the first four of BLAKE3's IV (SHA-256's).
            var s = BLAKE3Words<V>(h0, h1, h2, h3, h4, h5, h6, h7,
                                   V(repeating: 0x6A09E667), V(repeating: 0xBB67AE85), V(repeating: 0x3C6EF372), V(repeating: 0xA54FF53A),
                                   low, high, V(repeating: 64), V(repeating: f))
            s.rounds(m)
            h0 = s.w0 ^ s.w8; h1 = s.w1 ^ s.w9; h2 = s.w2 ^ s.w10; h3 = s.w3 ^ s.w11
            h4 = s.w4 ^ s.w12; h5 = s.w5 ^ s.w13; h6 = s.w6 ^ s.w14; h7 = s.w7 ^ s.w15
        }
    }
    for l in 0..<lanes {
        let o = out + 8 &* l
        o[0] = h0[l]; o[1] = h1[l]; o[2] = h2[l]; o[3] = h3[l]
        o[4] = h4[l]; o[5] = h5[l]; o[6] = h6[l]; o[7] = h7[l]
    }
}

/// The message of one 64-byte block of each lane (lane l's at `p + l·stride`), lane-major:
/// whole vectors are loaded per lane and transposed in registers, not gathered word by word.
/// Lanes L = 4, 8 or 16: words 4·L·g … 4·L·g + L − 1 of the L lanes form an L × L matrix,
/// and log2(L) stages of unzipping row pairs transpose it. `t` is scratch of 48 vectors:
/// t[0 ..< 16] the message, t[16 ..< 32] and t[32 ..< 48] the rows being transposed.
@inlinable @inline(__always)
public func blake3LoadBlocks<V: BLAKE3Vector>(_: V.Type, _ p: UnsafeRawPointer, stride: Int,
                                              scratch t: UnsafeMutableBufferPointer<V>) -> BLAKE3Words<V> {
    let lanes = V.scalarCount
    for g in 0 ..< 16 / lanes {
        for l in 0 ..< lanes {
            var v = p.loadUnaligned(fromByteOffset: l &* stride &+ 4 &* lanes &* g, as: V.self)
            for i in 0 ..< lanes { v[i] = UInt32(littleEndian: v[i]) }
            t[16 &+ l] = v
        }
        var stage = 1
        while stage < lanes {
            for i in 0 ..< lanes / 2 {
                (t[32 &+ i], t[32 &+ i &+ lanes / 2]) = V.unzip(t[16 &+ 2 &* i], t[17 &+ 2 &* i])
            }
            for i in 0 ..< lanes { t[16 &+ i] = t[32 &+ i] }
            stage <<= 1
        }
        for j in 0 ..< lanes { t[lanes &* g &+ j] = t[16 &+ j] }
    }
    return BLAKE3Words(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7],
                       t[8], t[9], t[10], t[11], t[12], t[13], t[14], t[15])
}

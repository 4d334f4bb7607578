// BLAKE3's round function, written once for a scalar word (uint32_t) and for a vector of
// words (one input per lane): the macros expect `v` (16 state words) and `m` (16 message
// words) in scope, of the same type. Internal to CBLAKE3.
#ifndef CBLAKE3_ROUNDS_H
#define CBLAKE3_ROUNDS_H

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "CBLAKE3 reads message words in the host's byte order: little-endian hosts only"
#endif

/// The first four words of BLAKE3's IV (those of SHA-256's) and the other four.
#define CBLAKE3_IV0 0x6A09E667u
#define CBLAKE3_IV1 0xBB67AE85u
#define CBLAKE3_IV2 0x3C6EF372u
#define CBLAKE3_IV3 0xA54FF53Au
#define CBLAKE3_IV4 0x510E527Fu
#define CBLAKE3_IV5 0x9B05688Cu
#define CBLAKE3_IV6 0x1F83D9ABu
#define CBLAKE3_IV7 0x5BE0CD19u

// Rotation right, as the sum of the two disjoint halves rather than their or: the same
// value, and LLVM keeps it in vector form on plain SSE2 too while still finding a rotate
// instruction (vprold) with AVX-512.
#define CBLAKE3_ROTR(x, n) (((x) >> (n)) + ((x) << (32 - (n))))

#define CBLAKE3_G(a, b, c, d, x, y) \
    v[a] = v[a] + v[b] + (x); v[d] = CBLAKE3_ROTR(v[d] ^ v[a], 16); \
    v[c] = v[c] + v[d];       v[b] = CBLAKE3_ROTR(v[b] ^ v[c], 12); \
    v[a] = v[a] + v[b] + (y); v[d] = CBLAKE3_ROTR(v[d] ^ v[a], 8);  \
    v[c] = v[c] + v[d];       v[b] = CBLAKE3_ROTR(v[b] ^ v[c], 7);

/// One round with the message words in the order s0 … s15: columns, then diagonals.
#define CBLAKE3_ROUND(s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15) \
    CBLAKE3_G(0, 4, 8, 12, m[s0], m[s1])   CBLAKE3_G(1, 5, 9, 13, m[s2], m[s3])            \
    CBLAKE3_G(2, 6, 10, 14, m[s4], m[s5])  CBLAKE3_G(3, 7, 11, 15, m[s6], m[s7])           \
    CBLAKE3_G(0, 5, 10, 15, m[s8], m[s9])  CBLAKE3_G(1, 6, 11, 12, m[s10], m[s11])         \
    CBLAKE3_G(2, 7, 8, 13, m[s12], m[s13]) CBLAKE3_G(3, 4, 9, 14, m[s14], m[s15])

/// The seven rounds. Round r + 1 takes the words of round r through BLAKE3's message
/// permutation (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8); the orders below are
/// that permutation applied 0 … 6 times, so nothing is moved at run time.
#define CBLAKE3_ROUNDS                                                   \
    CBLAKE3_ROUND(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) \
    CBLAKE3_ROUND(2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8) \
    CBLAKE3_ROUND(3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1) \
    CBLAKE3_ROUND(10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6) \
    CBLAKE3_ROUND(12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4) \
    CBLAKE3_ROUND(9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7) \
    CBLAKE3_ROUND(11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13)

#endif

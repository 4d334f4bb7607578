// CBLAKE3: BLAKE3's compression function in C, for PeerCrypto's BLAKE3 (the only importer).
//
// The lane kernels compress one 64-byte block of several independent inputs at once, one
// input per SIMD lane (the parallel form of the BLAKE3 paper, section 5.3). Each kernel is
// compiled for its own instruction set by a function attribute (AVX2, AVX-512), not by
// compiler flags, and is called only on a CPU that has it (`cblake3_widest`, from CPUID).
// PeerCrypto holds the tree, the streaming hasher and the Swift API.
#ifndef CBLAKE3_H
#define CBLAKE3_H

#include <stddef.h>
#include <stdint.h>

/// The widest lane count this CPU runs: 16 with AVX-512 (F and VL, enabled by the OS), 8 with
/// AVX2, else 4 (SSE2 on every x86-64; the compiler's generic vectors elsewhere).
int cblake3_widest(void);

/// One compression of one input: `cv` (8 words) is updated in place from the 64 bytes at
/// `block` (already padded with zeros past `length`), with block counter `counter`.
void cblake3_compress(uint32_t cv[8], const void *block, uint32_t length, uint64_t counter, uint32_t flags);

/// Compresses `blocks` consecutive 64-byte blocks of each of `width` inputs at once (4, 8 or
/// 16; a width this CPU lacks is run 4 at a time): input l starts at `p + l·stride` and
/// chains from `key` (8 words) with block counter `counter + l·counter_step`; every block's
/// length is 64, `flags` is on every block, `first_flags` also on the first and `last_flags`
/// also on the last. Input l's 8-word chaining value is written at `out + 8·l`.
void cblake3_compress_lanes(int width, const void *p, size_t stride, size_t blocks, const uint32_t key[8],
                            uint64_t counter, uint64_t counter_step, uint32_t flags, uint32_t first_flags,
                            uint32_t last_flags, uint32_t *out);

#endif

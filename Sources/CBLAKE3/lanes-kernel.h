// The body of one lane kernel, included once per width by lanes.c (no include guard). The
// includer defines:
//   KERNEL_NAME     the function's name
//   KERNEL_TARGET   its instruction-set attribute (empty for the compiler's default)
//   KV, KVU         the vector of KL words, and the same type for unaligned loads
//   KL              lanes: 4, 8 or 16
//   KEVEN, KODD     the even (odd) words of the 2·KL words of two vectors, a's then b's
// It computes what `cblake3_compress_lanes` says (CBLAKE3.h) for width KL, and undefines
// those names again for the next width.

KERNEL_TARGET
static void KERNEL_NAME(const uint8_t *p, size_t stride, size_t blocks, const uint32_t key[8],
                        uint64_t counter, uint64_t counter_step, uint32_t flags, uint32_t first_flags,
                        uint32_t last_flags, uint32_t *out) {
    KV h[8];
    for (int j = 0; j < 8; j++) h[j] = (KV){0} + key[j];
    uint32_t low[KL], high[KL];
    for (int l = 0; l < KL; l++) {
        uint64_t c = counter + (uint64_t)l * counter_step;
        low[l] = (uint32_t)c;
        high[l] = (uint32_t)(c >> 32);
    }
    const KV counter_low = *(const KVU *)low, counter_high = *(const KVU *)high;

    for (size_t b = 0; b < blocks; b++) {
        // The message, word-major: m[w] holds word w of every lane. Whole vectors are loaded
        // per lane and transposed in registers, KL × KL words at a time: log2(KL) stages of
        // splitting pairs of rows into their even and odd words.
        KV m[16];
        const uint8_t *block = p + b * 64;
#pragma clang loop unroll(full)
        for (int g = 0; g < 16 / KL; g++) {
            KV t[KL], u[KL];
#pragma clang loop unroll(full)
            for (int l = 0; l < KL; l++) t[l] = *(const KVU *)(block + (size_t)l * stride + 4 * KL * g);
#pragma clang loop unroll(full)
            for (int stage = 1; stage < KL; stage <<= 1) {
#pragma clang loop unroll(full)
                for (int i = 0; i < KL / 2; i++) {
                    u[i] = KEVEN(t[2 * i], t[2 * i + 1]);
                    u[i + KL / 2] = KODD(t[2 * i], t[2 * i + 1]);
                }
#pragma clang loop unroll(full)
                for (int i = 0; i < KL; i++) t[i] = u[i];
            }
#pragma clang loop unroll(full)
            for (int j = 0; j < KL; j++) m[KL * g + j] = t[j];
        }
        const uint32_t f = flags | (b == 0 ? first_flags : 0) | (b == blocks - 1 ? last_flags : 0);
        KV v[16] = {
            h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
            (KV){0} + CBLAKE3_IV0, (KV){0} + CBLAKE3_IV1, (KV){0} + CBLAKE3_IV2, (KV){0} + CBLAKE3_IV3,
            counter_low, counter_high, (KV){0} + 64u, (KV){0} + f,
        };
        CBLAKE3_ROUNDS
        for (int j = 0; j < 8; j++) h[j] = v[j] ^ v[j + 8];
    }
    for (int l = 0; l < KL; l++) {
        for (int j = 0; j < 8; j++) out[8 * l + j] = h[j][l];
    }
}

#undef KERNEL_NAME
#undef KERNEL_TARGET
#undef KV
#undef KVU
#undef KL
#undef KEVEN
#undef KODD

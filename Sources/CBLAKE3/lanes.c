// The three lane kernels (4, 8 and 16 inputs side by side) and the choice among them by the
// CPU's features at run time. The AVX2 and AVX-512 kernels carry their instruction set as a
// function attribute, so the rest of the program stays baseline x86-64 and runs anywhere.
#include "CBLAKE3.h"
#include "rounds.h"

typedef uint32_t v4 __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16), aligned(1), may_alias));
typedef uint32_t v8 __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32), aligned(1), may_alias));
typedef uint32_t v16 __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64), aligned(1), may_alias));

// 4 lanes: SSE2 on x86-64 (every such CPU), the generic vectors of the compiler elsewhere.
#define KERNEL_NAME compress4
#define KERNEL_TARGET
#define KV v4
#define KVU v4u
#define KL 4
#define KEVEN(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6)
#define KODD(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7)
#include "lanes-kernel.h"

#if defined(__x86_64__)
#define KERNEL_NAME compress8_avx2
#define KERNEL_TARGET __attribute__((target("avx2")))
#define KV v8
#define KVU v8u
#define KL 8
#define KEVEN(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define KODD(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15)
#include "lanes-kernel.h"

#define KERNEL_NAME compress16_avx512
#define KERNEL_TARGET __attribute__((target("avx512f,avx512vl")))
#define KV v16
#define KVU v16u
#define KL 16
#define KEVEN(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define KODD(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
#include "lanes-kernel.h"
#endif

/// The widest kernel the CPU runs, found once (0 until then). `__builtin_cpu_supports` reads
/// CPUID and also checks that the OS saves the vector registers (XGETBV).
static int widest_found;

int cblake3_widest(void) {
    int widest = __atomic_load_n(&widest_found, __ATOMIC_RELAXED);
    if (widest != 0) return widest;
    widest = 4;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        widest = 8;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) widest = 16;
    }
#endif
    __atomic_store_n(&widest_found, widest, __ATOMIC_RELAXED);
    return widest;
}

void cblake3_compress_lanes(int width, const void *bytes, size_t stride, size_t blocks, const uint32_t key[8],
                            uint64_t counter, uint64_t counter_step, uint32_t flags, uint32_t first_flags,
                            uint32_t last_flags, uint32_t *out) {
    const uint8_t *p = bytes;
    if (width > cblake3_widest()) {
        // Never asked by PeerCrypto; a width the CPU lacks still gives the right answer.
        for (int l = 0; l < width; l += 4) {
            compress4(p + (size_t)l * stride, stride, blocks, key, counter + (uint64_t)l * counter_step, counter_step,
                      flags, first_flags, last_flags, out + 8 * l);
        }
        return;
    }
    switch (width) {
#if defined(__x86_64__)
    case 16:
        compress16_avx512(p, stride, blocks, key, counter, counter_step, flags, first_flags, last_flags, out);
        break;
    case 8:
        compress8_avx2(p, stride, blocks, key, counter, counter_step, flags, first_flags, last_flags, out);
        break;
#endif
    default:
        compress4(p, stride, blocks, key, counter, counter_step, flags, first_flags, last_flags, out);
    }
}

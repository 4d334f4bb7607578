// One compression of one input, in portable C (the tree's odd nodes, partial chunks and the
// streaming hasher's last chunk).
#include "CBLAKE3.h"
#include "rounds.h"

typedef uint32_t word_unaligned __attribute__((aligned(1), may_alias));

void cblake3_compress(uint32_t cv[8], const void *block, uint32_t length, uint64_t counter, uint32_t flags) {
    uint32_t m[16];
    for (int j = 0; j < 16; j++) m[j] = ((const word_unaligned *)block)[j];
    uint32_t v[16] = {
        cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7],
        CBLAKE3_IV0, CBLAKE3_IV1, CBLAKE3_IV2, CBLAKE3_IV3,
        (uint32_t)counter, (uint32_t)(counter >> 32), length, flags,
    };
    CBLAKE3_ROUNDS
    for (int j = 0; j < 8; j++) cv[j] = v[j] ^ v[j + 8];
}

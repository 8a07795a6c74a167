/* test_rng.h — the random draws of the randomized tests and the fuzz driver.
 *
 * An xorshift64 state whose output goes through splitmix64's finalizer, so every output bit
 * depends on every state bit. Raw xorshift64 outputs drawn one after another are linked in
 * their low bits: in test_alloc_random the stream drawn right after a slot index was a function
 * of that index, so record_stream never named another stream and no free was ever left pending.
 * Each test keeps its own state (seeded as it likes) and calls test_rng(&state).
 */
#ifndef VRAM_TEST_RNG_H
#define VRAM_TEST_RNG_H

#include <stdint.h>

static inline uint64_t test_rng(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#endif

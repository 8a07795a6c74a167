/* live_map.h — the allocator's map from a live block's address to its block (live, pending and
 * deferred blocks: allocator_internal.h): open addressing with linear probing and
 * backward-shift deletion (no tombstones, so lookups stay short after millions of frees).
 * Capacity is a power of two kept at least twice the count; address 0 marks an empty slot.
 * Header-only so that malloc and free, which touch it on every call, inline it.
 */
#ifndef VRAM_LIVE_MAP_H
#define VRAM_LIVE_MAP_H

#include <stdlib.h>

#include "allocator_internal.h"

static inline uint64_t live_hash(uint64_t key, uint64_t cap) {
    uint64_t h = (key >> 9) * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 29)) & (cap - 1);
}

static inline int live_grow(vram_live_map *m) {
    uint64_t ncap = m->cap ? m->cap * 2 : 1024;
    uint64_t *keys = calloc(ncap, sizeof *keys);
    vram_block **values = calloc(ncap, sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return -1;
    }
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        uint64_t j = live_hash(m->keys[i], ncap);
        while (keys[j]) j = (j + 1) & (ncap - 1);
        keys[j] = m->keys[i];
        values[j] = m->values[i];
    }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = ncap;
    return 0;
}

static inline int live_put(vram_live_map *m, vram_block *b) {
    if ((m->count + 1) * 2 > m->cap && live_grow(m) != 0) return -1;
    uint64_t j = live_hash(b->addr, m->cap);
    while (m->keys[j]) j = (j + 1) & (m->cap - 1);
    m->keys[j] = b->addr;
    m->values[j] = b;
    m->count++;
    return 0;
}

static inline vram_block *vram_live_get(const vram_live_map *m, uint64_t key) {
    if (!m->cap || !key) return NULL;
    for (uint64_t j = live_hash(key, m->cap);; j = (j + 1) & (m->cap - 1)) {
        if (m->keys[j] == key) return m->values[j];
        if (!m->keys[j]) return NULL;
    }
}

static inline void live_del(vram_live_map *m, uint64_t key) {
    uint64_t mask = m->cap - 1, j = live_hash(key, m->cap);
    while (m->keys[j] != key) j = (j + 1) & mask;
    m->count--;
    for (uint64_t k = (j + 1) & mask;; k = (k + 1) & mask) {
        if (!m->keys[k]) break;
        uint64_t home = live_hash(m->keys[k], m->cap);
        /* move k back to j if its home is not cyclically in (j, k] */
        if (((k - home) & mask) >= ((k - j) & mask)) {
            m->keys[j] = m->keys[k];
            m->values[j] = m->values[k];
            j = k;
        }
    }
    m->keys[j] = 0;
    m->values[j] = NULL;
}

#endif

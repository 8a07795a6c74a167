/* live_map.h — the allocator's map from a live block's address to its block (live, pending and
 * deferred blocks: allocator_internal.h): open addressing with linear probing and
 * backward-shift deletion (no tombstones, so lookups stay short after millions of frees).
 * Capacity is a power of two kept at least twice the count; address 0 marks an empty slot.
 * Keys and values share a slot, so a lookup touches one cache line. Header-only so that malloc
 * and free, which touch it on every call, inline it.
 */
#ifndef VRAM_LIVE_MAP_H
#define VRAM_LIVE_MAP_H

#include <stdlib.h>

#include "allocator_internal.h"

static inline uint64_t vi_live_hash(uint64_t key, uint64_t cap) {
    uint64_t h = (key >> 9) * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 29)) & (cap - 1);
}

static inline int vi_live_grow(vi_live_map *m) {
    uint64_t ncap = m->cap ? m->cap * 2 : 1024;
    vi_live_slot *slots = calloc(ncap, sizeof *slots);
    if (!slots) return -1;
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        uint64_t j = vi_live_hash(m->slots[i].key, ncap);
        while (slots[j].key) j = (j + 1) & (ncap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = ncap;
    return 0;
}

static inline int vi_live_put(vi_live_map *m, vi_block *b) {
    if ((m->count + 1) * 2 > m->cap && vi_live_grow(m) != 0) return -1;
    uint64_t j = vi_live_hash(b->addr, m->cap);
    while (m->slots[j].key) j = (j + 1) & (m->cap - 1);
    m->slots[j].key = b->addr;
    m->slots[j].value = b;
    m->count++;
    return 0;
}

/* The block of address key, or NULL; *slot (if given) tells where it was found, for
 * vi_live_del_near. */
static inline vi_block *vi_live_find(const vi_live_map *m, uint64_t key, uint64_t *slot) {
    if (!m->cap || !key) return NULL;
    for (uint64_t j = vi_live_hash(key, m->cap);; j = (j + 1) & (m->cap - 1)) {
        if (m->slots[j].key == key) {
            if (slot) *slot = j;
            return m->slots[j].value;
        }
        if (!m->slots[j].key) return NULL;
    }
}

static inline vi_block *vi_live_get(const vi_live_map *m, uint64_t key) { return vi_live_find(m, key, NULL); }

/* Removes the entry in slot j. */
static inline void vi_live_del_slot(vi_live_map *m, uint64_t j) {
    uint64_t mask = m->cap - 1;
    m->count--;
    for (uint64_t k = (j + 1) & mask;; k = (k + 1) & mask) {
        if (!m->slots[k].key) break;
        uint64_t home = vi_live_hash(m->slots[k].key, m->cap);
        /* move k back to j if its home is not cyclically in (j, k] */
        if (((k - home) & mask) >= ((k - j) & mask)) {
            m->slots[j] = m->slots[k];
            j = k;
        }
    }
    m->slots[j].key = 0;
    m->slots[j].value = NULL;
}

/* Removes key (present in the map). */
static inline void vi_live_del(vi_live_map *m, uint64_t key) {
    uint64_t mask = m->cap - 1, j = vi_live_hash(key, m->cap);
    while (m->slots[j].key != key) j = (j + 1) & mask;
    vi_live_del_slot(m, j);
}

/* vi_live_del for a key that vi_live_find found in slot j: free looks a block up once and, when
 * it coalesces the block at once, removes its entry from there rather than searching again. A
 * slot that no longer holds the key (or UINT64_MAX: none known) is searched for. */
static inline void vi_live_del_near(vi_live_map *m, uint64_t key, uint64_t j) {
    if (j >= m->cap || m->slots[j].key != key) {
        vi_live_del(m, key);
        return;
    }
    vi_live_del_slot(m, j);
}

#endif

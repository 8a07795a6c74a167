/* bench_random_floor.c — how fast the random latency workload can go under the simplest
 * allocator of vram's kind, beside vram itself and beside the workload's own loop with no
 * allocator at all, in turns in one process:
 *
 *   bench_random_floor [DEVICE_SPEC] [--runs N] [--sizes all|small|large]
 *                                   (default cudasim, 7 rounds, all sizes)
 *
 * The workload is docs/benchmarks.md §2's random live set, warm (one untimed run first, the cache
 * kept), the same one bench_alloc_latency times. The floor allocator places as vram's bins do and
 * keeps none of the rest: best fit over the same segregated bins (512-byte steps below 32 KiB,
 * then 32 bins per power of two, a two-level bitmap of non-empty ones), a small pool (up to
 * 1 MiB) and a large one, each one address range grown at its end, every free coalesced with its
 * free neighbours at once, an address-to-block hash map, and one counter of allocated bytes. It
 * has no streams or events, no pages to map, no deferred frees or size classes, no statistics
 * beyond that counter, no lock, no history and no out-of-memory path. What vram spends above it
 * is what those features cost on this workload: the ceiling on what a leaner vram could gain
 * without giving any of them up is vram's time less the floor's.
 *
 * The third row, "harness", runs the same loop (the random numbers, the slot table) with no
 * allocator: every figure includes it, so an allocator's own time is its row less this one.
 * `--sizes small` or `large` keeps only the requests of one pool (up to 1 MiB, or above it; a
 * size outside is drawn again, so the sequence is no longer §2's), to see which pool a cost is in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/alloc.h"
#include "vram/bench.h"

/* ---- the floor allocator ---------------------------------------------------------------- */

enum { NBINS = 1664, BIN_WORDS = (NBINS + 63) / 64, SCAN = 32 };

typedef struct fblock {
    uint64_t addr, size;
    struct fblock *prev, *next;   /* address neighbours */
    struct fblock *fprev, *fnext; /* bin list, while free */
    unsigned bin;
    int free;
} fblock;

typedef struct fpool {
    fblock *bins[NBINS];
    uint64_t bitmap[BIN_WORDS], summary;
    fblock *top;      /* the free block at the range's end (never in a bin) */
    uint64_t base, reserved, reserved_peak;
} fpool;

typedef struct floor_alloc {
    fpool pools[2]; /* [0] small, [1] large */
    struct { uint64_t key; fblock *value; } *map;
    uint64_t cap, count;
    fblock *spare; /* recycled block structs */
    uint64_t allocated, allocated_peak;
} floor_alloc;

static unsigned bin_of(uint64_t size) {
    uint64_t u = size >> 9;
    if (u < 64) return (unsigned)u;
    unsigned fl = 63u - (unsigned)__builtin_clzll(u);
    unsigned bin = 64u + (fl - 6u) * 32u + ((unsigned)(u >> (fl - 5)) & 31u);
    return bin < NBINS ? bin : NBINS - 1;
}

static void bin_insert(fpool *p, fblock *b) {
    unsigned i = bin_of(b->size);
    b->bin = i;
    b->fprev = NULL;
    b->fnext = p->bins[i];
    if (b->fnext) b->fnext->fprev = b;
    p->bins[i] = b;
    p->bitmap[i >> 6] |= 1ull << (i & 63);
    p->summary |= 1ull << (i >> 6);
}

static void bin_remove(fpool *p, fblock *b) {
    unsigned i = b->bin;
    if (b->fprev) b->fprev->fnext = b->fnext;
    else p->bins[i] = b->fnext;
    if (b->fnext) b->fnext->fprev = b->fprev;
    if (!p->bins[i] && !(p->bitmap[i >> 6] &= ~(1ull << (i & 63)))) p->summary &= ~(1ull << (i >> 6));
}

static unsigned bin_next(const fpool *p, unsigned i) {
    if (i >= NBINS) return NBINS;
    unsigned w = i >> 6;
    uint64_t bits = p->bitmap[w] & (~0ull << (i & 63));
    if (bits) return (w << 6) + (unsigned)__builtin_ctzll(bits);
    uint64_t sum = w + 1 < 64 ? p->summary & (~0ull << (w + 1)) : 0;
    if (!sum) return NBINS;
    w = (unsigned)__builtin_ctzll(sum);
    return (w << 6) + (unsigned)__builtin_ctzll(p->bitmap[w]);
}

static uint64_t hash(uint64_t key, uint64_t cap) {
    uint64_t h = (key >> 9) * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 29)) & (cap - 1);
}

static void map_put(floor_alloc *f, fblock *b) { /* the map is sized for the workload up front */
    uint64_t j = hash(b->addr, f->cap);
    while (f->map[j].key) j = (j + 1) & (f->cap - 1);
    f->map[j].key = b->addr;
    f->map[j].value = b;
}

static fblock *map_take(floor_alloc *f, uint64_t key) {
    uint64_t mask = f->cap - 1, j = hash(key, f->cap);
    while (f->map[j].key != key) j = (j + 1) & mask;
    fblock *b = f->map[j].value;
    for (uint64_t k = (j + 1) & mask; f->map[k].key; k = (k + 1) & mask) { /* backward shift */
        uint64_t home = hash(f->map[k].key, f->cap);
        if (((k - home) & mask) >= ((k - j) & mask)) {
            f->map[j] = f->map[k];
            j = k;
        }
    }
    f->map[j].key = 0;
    return b;
}

static fblock *block_new(floor_alloc *f) {
    fblock *b = f->spare;
    if (b) f->spare = b->fnext;
    else b = malloc(sizeof *b);
    return b;
}

/* Best fit in the bins, else the range's end; NULL only when the host is out of memory. */
static void *floor_malloc(floor_alloc *f, uint64_t size) {
    uint64_t rsize = size < 512 ? 512 : (size + 511) & ~511ull;
    fpool *p = &f->pools[rsize > (1u << 20)];
    fblock *b = NULL;
    for (unsigned i = bin_next(p, bin_of(rsize)); i < NBINS && !b; i = bin_next(p, i + 1)) {
        int n = 0;
        for (fblock *c = p->bins[i]; c && n < SCAN; c = c->fnext, n++)
            if (c->size >= rsize && (!b || c->size < b->size || (c->size == b->size && c->addr < b->addr))) b = c;
    }
    if (b) bin_remove(p, b);
    else b = p->top;
    if (b->size - rsize >= 512 || b == p->top) { /* split: the remainder keeps b's place */
        fblock *rest = block_new(f);
        if (!rest) return NULL;
        *rest = (fblock){b->addr + rsize, b->size - rsize, b, b->next, NULL, NULL, 0, 1};
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = rsize;
        if (b == p->top) {
            p->top = rest;
            if (rest->addr - p->base > p->reserved) p->reserved = rest->addr - p->base;
            if (p->reserved > p->reserved_peak) p->reserved_peak = p->reserved;
        } else {
            bin_insert(p, rest);
        }
    }
    b->free = 0;
    map_put(f, b);
    f->allocated += b->size;
    if (f->allocated > f->allocated_peak) f->allocated_peak = f->allocated;
    return (void *)(uintptr_t)b->addr;
}

/* Merges `next`, the block after `keep`, into keep and recycles its struct. */
static void absorb(floor_alloc *f, fblock *keep, fblock *next) {
    keep->size += next->size;
    keep->next = next->next;
    if (next->next) next->next->prev = keep;
    next->fnext = f->spare;
    f->spare = next;
}

/* Coalesces the block with its free neighbours (a block freed before the top becomes the top). */
static void floor_free(floor_alloc *f, void *ptr) {
    fblock *b = map_take(f, (uint64_t)(uintptr_t)ptr);
    fpool *p = &f->pools[b->addr >= f->pools[1].base]; /* the pools' ranges lie apart */
    f->allocated -= b->size;
    b->free = 1;
    if (b->prev && b->prev->free) {
        bin_remove(p, b->prev);
        b = b->prev;
        absorb(f, b, b->next);
    }
    fblock *x = b->next;
    if (x && x->free) {
        if (x != p->top) bin_remove(p, x);
        else p->top = b;
        absorb(f, b, x);
        if (p->top == b) return; /* the top stays out of the bins */
    }
    bin_insert(p, b);
}

static int floor_init(floor_alloc *f) {
    memset(f, 0, sizeof *f);
    f->cap = 4096; /* above twice the workload's 1000 live blocks */
    f->map = calloc(f->cap, sizeof *f->map);
    for (int i = 0; i < 2; i++) {
        fpool *p = &f->pools[i];
        p->base = (uint64_t)(i + 1) << 40;
        p->top = malloc(sizeof *p->top);
        if (!p->top) return -1;
        *p->top = (fblock){p->base, 1ull << 39, NULL, NULL, NULL, NULL, 0, 1};
    }
    return f->map ? 0 : -1;
}

/* Whether the floor allocator is consistent with everything freed: each pool's blocks tile its
 * range from its base, all free, none two side by side, and its bins hold all but the top. */
static int floor_consistent(const floor_alloc *f) {
    if (f->allocated) return 0;
    for (int i = 0; i < 2; i++) {
        const fpool *p = &f->pools[i];
        const fblock *b = p->top;
        while (b->prev) b = b->prev;
        uint64_t at = p->base, blocks = 0, binned = 0;
        for (; b; at += b->size, b = b->next, blocks++)
            if (b->addr != at || !b->free || (b->next && b->next->prev != b) || (b->prev && b->prev->free)) return 0;
        for (unsigned k = 0; k < NBINS; k++)
            for (const fblock *c = p->bins[k]; c; c = c->fnext) binned++;
        if (at != p->base + (1ull << 39) || binned + 1 != blocks) return 0;
    }
    return 1;
}

static void floor_destroy(floor_alloc *f) {
    for (int i = 0; i < 2; i++) {
        fblock *b = f->pools[i].top;
        while (b && b->prev) b = b->prev;
        while (b) {
            fblock *n = b->next;
            free(b);
            b = n;
        }
    }
    while (f->spare) {
        fblock *n = f->spare->fnext;
        free(f->spare);
        f->spare = n;
    }
    free(f->map);
}

/* ---- the workload, through either ------------------------------------------------------ */

/* What run_once times: vram, the floor allocator, or no allocator (the harness alone). */
typedef enum { RUN_VRAM, RUN_FLOOR, RUN_HARNESS } run_kind;

/* Which requests the workload keeps (--sizes). */
typedef enum { SIZES_ALL, SIZES_SMALL, SIZES_LARGE } size_range;

static uint64_t draw_size(uint64_t *xs, size_range range) {
    for (;;) {
        uint64_t size = vram_bench_size(xs);
        if (range == SIZES_ALL || (range == SIZES_SMALL) == (size <= (1u << 20))) return size;
    }
}

/* One run of the workload; ns per operation (negative: an allocation failed). The harness's
 * "allocation" is a non-null token, and its free does nothing. */
static double run_once(run_kind kind, vram_allocator *a, floor_alloc *f, size_range range) {
    enum { SLOTS = 1000, OPS = 200000 };
    static void *slot[SLOTS];
    uint64_t xs = VRAM_BENCH_SEED;
    int failed = 0;
    double t0 = vram_bench_now_ns();
    for (int op = 0; op < OPS; op++) {
        uint64_t k = vram_bench_next(&xs) % SLOTS;
        if (slot[k]) {
            if (kind == RUN_VRAM) vram_allocator_free(a, slot[k]);
            else if (kind == RUN_FLOOR) floor_free(f, slot[k]);
            slot[k] = NULL;
        } else {
            uint64_t size = draw_size(&xs, range);
            if (kind == RUN_VRAM) failed |= vram_allocator_malloc(a, (size_t)size, 0, VRAM_TAG_OTHER, &slot[k]) != VRAM_OK;
            else if (kind == RUN_FLOOR) failed |= (slot[k] = floor_malloc(f, size)) == NULL;
            else slot[k] = (void *)(uintptr_t)(size | 1);
        }
    }
    double ns = (vram_bench_now_ns() - t0) / OPS;
    for (int k = 0; k < SLOTS; k++) {
        if (slot[k] && kind == RUN_VRAM) vram_allocator_free(a, slot[k]);
        else if (slot[k] && kind == RUN_FLOOR) floor_free(f, slot[k]);
        slot[k] = NULL;
    }
    return failed ? -1 : ns;
}

int main(int argc, char **argv) {
    const char *spec = "cudasim";
    int runs = 7;
    size_range range = SIZES_ALL;
    static const char *const range_names[] = {"all", "small", "large"};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            const char *v = argv[++i];
            range = !strcmp(v, "small") ? SIZES_SMALL : !strcmp(v, "large") ? SIZES_LARGE : SIZES_ALL;
            if (range == SIZES_ALL && strcmp(v, "all")) {
                fprintf(stderr, "bench_random_floor: --sizes must be all, small or large, not '%s'\n", v);
                return 2;
            }
        } else if (argv[i][0] != '-') {
            spec = argv[i];
        } else {
            fprintf(stderr, "usage: bench_random_floor [DEVICE_SPEC] [--runs N] [--sizes all|small|large]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 99) {
        fprintf(stderr, "bench_random_floor: --runs must be 1 to 99\n");
        return 2;
    }
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    floor_alloc f;
    if (vram_device_open(spec, &dev) != VRAM_OK || vram_allocator_new(dev, NULL, &a) != VRAM_OK) {
        fprintf(stderr, "bench_random_floor: %s: %s\n", spec, vram_last_error());
        if (dev) vram_device_close(dev);
        return 1;
    }
    if (floor_init(&f) != 0) {
        fprintf(stderr, "bench_random_floor: host out of memory\n");
        return 1;
    }
    vram_machine_print(stdout, argc, argv);
    printf("device:  %s (%s), for vram\n\n", spec, dev->name);
    double vram_ns[99], floor_ns[99], harness_ns[99];
    run_once(RUN_VRAM, a, NULL, range); /* the untimed warm-up runs */
    run_once(RUN_FLOOR, NULL, &f, range);
    run_once(RUN_HARNESS, NULL, NULL, range);
    for (int r = 0; r < runs; r++) { /* in turns, so that all see the same machine */
        vram_ns[r] = run_once(RUN_VRAM, a, NULL, range);
        floor_ns[r] = run_once(RUN_FLOOR, NULL, &f, range);
        harness_ns[r] = run_once(RUN_HARNESS, NULL, NULL, range);
        if (vram_ns[r] < 0 || floor_ns[r] < 0) {
            fprintf(stderr, "bench_random_floor: an allocation failed (%s)\n", vram_last_error());
            return 1;
        }
    }
    if (!floor_consistent(&f)) {
        fprintf(stderr, "bench_random_floor: the floor allocator is inconsistent after the runs (a bug in it)\n");
        return 1;
    }
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    qsort(vram_ns, (size_t)runs, sizeof vram_ns[0], vram_bench_cmp_double);
    qsort(floor_ns, (size_t)runs, sizeof floor_ns[0], vram_bench_cmp_double);
    qsort(harness_ns, (size_t)runs, sizeof harness_ns[0], vram_bench_cmp_double);
    printf("The random workload, warm, %d runs of 200000 operations each, in turns; ns per operation, "
           "harness included; sizes: %s.\n\n", runs, range_names[range]);
    printf("| allocator | ns per op, median | min | max | peak reserved | peak allocated |\n|---|---|---|---|---|---|\n");
    printf("| vram | %.1f | %.1f | %.1f | %.2f GB | %.2f GB |\n", vram_ns[runs / 2], vram_ns[0], vram_ns[runs - 1],
           st.reserved_bytes[0].peak / 1e9, st.allocated_bytes[0].peak / 1e9);
    printf("| floor (best fit in the same bins, nothing else) | %.1f | %.1f | %.1f | %.2f GB | %.2f GB |\n",
           floor_ns[runs / 2], floor_ns[0], floor_ns[runs - 1],
           (f.pools[0].reserved_peak + f.pools[1].reserved_peak) / 1e9, f.allocated_peak / 1e9);
    printf("| harness (the loop, no allocator) | %.1f | %.1f | %.1f | - | - |\n", harness_ns[runs / 2], harness_ns[0],
           harness_ns[runs - 1]);
    double h = harness_ns[runs / 2];
    printf("\nvram / floor: %.2f\n", vram_ns[runs / 2] / floor_ns[runs / 2]);
    printf("less the harness: vram %.1f ns, floor %.1f ns an operation; vram / floor %.2f\n", vram_ns[runs / 2] - h,
           floor_ns[runs / 2] - h, (vram_ns[runs / 2] - h) / (floor_ns[runs / 2] - h));
    floor_destroy(&f);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return 0;
}

/* bench_random_floor.c — how fast the random latency workload can go under the simplest
 * allocator of vram's kind, beside vram itself, beside an allocator of another kind (size
 * classes) and beside the workload's own loop with no allocator at all, in turns in one process:
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
 * The third row, "size classes", is the other end of the trade: every request rounded up to its
 * bin's top size and each class a stack of its own freed blocks, so an operation is a hash-map
 * update and a push or pop, with no search, split or merge; and a freed block never serves
 * another size, so it reserves several times the floor's memory. It shows what a tenth of
 * PyTorch's time on this workload (issue 3) would cost in memory.
 *
 * The fourth row, "harness", runs the same loop (the random numbers, the slot table) with no
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

/* An address -> value hash map: open addressing, linear probes, backward-shift deletion; sized
 * for the workload up front (4096 slots, above four times its 1000 live blocks), never grown. */
typedef struct addr_map {
    struct { uint64_t key; uintptr_t value; } *slots;
    uint64_t cap;
} addr_map;

typedef struct floor_alloc {
    fpool pools[2]; /* [0] small, [1] large */
    addr_map map;
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

static int map_init(addr_map *m) {
    m->cap = 4096;
    m->slots = calloc(m->cap, sizeof *m->slots);
    return m->slots ? 0 : -1;
}

static void map_put(addr_map *m, uint64_t key, uintptr_t value) {
    uint64_t j = hash(key, m->cap);
    while (m->slots[j].key) j = (j + 1) & (m->cap - 1);
    m->slots[j].key = key;
    m->slots[j].value = value;
}

static uintptr_t map_take(addr_map *m, uint64_t key) {
    uint64_t mask = m->cap - 1, j = hash(key, m->cap);
    while (m->slots[j].key != key) j = (j + 1) & mask;
    uintptr_t value = m->slots[j].value;
    for (uint64_t k = (j + 1) & mask; m->slots[k].key; k = (k + 1) & mask) { /* backward shift */
        uint64_t home = hash(m->slots[k].key, m->cap);
        if (((k - home) & mask) >= ((k - j) & mask)) {
            m->slots[j] = m->slots[k];
            j = k;
        }
    }
    m->slots[j].key = 0;
    return value;
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
    map_put(&f->map, b->addr, (uintptr_t)b);
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
    fblock *b = (fblock *)map_take(&f->map, (uint64_t)(uintptr_t)ptr);
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
    for (int i = 0; i < 2; i++) {
        fpool *p = &f->pools[i];
        p->base = (uint64_t)(i + 1) << 40;
        p->top = malloc(sizeof *p->top);
        if (!p->top) return -1;
        *p->top = (fblock){p->base, 1ull << 39, NULL, NULL, NULL, NULL, 0, 1};
    }
    return map_init(&f->map);
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
    free(f->map.slots);
}

/* ---- the size-class allocator: the other end of the trade ------------------------------ */

/* Every request rounded up to the top of its bin (512-byte steps below 32 KiB, 32 classes per
 * power of two above: at most 1/32 more than asked), each class a stack of the free addresses
 * it ever handed out, taken back only for that class: no search, split or merge. What it
 * saves in time it pays in memory, since a freed block never serves another class. */
typedef struct class_alloc {
    struct { uint64_t *addr; uint32_t n, cap; } free_of[NBINS];
    addr_map map;                     /* address -> its class's size */
    uint64_t top[2], base[2];         /* each pool's range, grown at its end */
    uint64_t allocated, allocated_peak;
} class_alloc;

static uint64_t class_size(uint64_t size) {
    uint64_t u = size < 512 ? 1 : (size + 511) >> 9;
    if (u >= 64) {
        unsigned step = 63u - (unsigned)__builtin_clzll(u) - 5u;
        u = ((u + (1ull << step) - 1) >> step) << step;
    }
    return u << 9;
}

/* NULL only when the host is out of memory. */
static void *class_malloc(class_alloc *c, uint64_t size) {
    uint64_t csize = class_size(size);
    unsigned k = bin_of(csize);
    uint64_t addr;
    if (c->free_of[k].n) {
        addr = c->free_of[k].addr[--c->free_of[k].n];
    } else {
        int large = csize > (1u << 20);
        addr = c->top[large];
        c->top[large] += csize;
    }
    map_put(&c->map, addr, csize);
    c->allocated += csize;
    if (c->allocated > c->allocated_peak) c->allocated_peak = c->allocated;
    return (void *)(uintptr_t)addr;
}

/* -1 only when the host is out of memory (the block is then not freed). */
static int class_free(class_alloc *c, void *ptr) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    uint64_t csize = map_take(&c->map, addr);
    unsigned k = bin_of(csize);
    if (c->free_of[k].n == c->free_of[k].cap) {
        uint32_t cap = c->free_of[k].cap ? 2 * c->free_of[k].cap : 16;
        uint64_t *grown = realloc(c->free_of[k].addr, cap * sizeof *grown);
        if (!grown) {
            map_put(&c->map, addr, csize);
            return -1;
        }
        c->free_of[k].addr = grown;
        c->free_of[k].cap = cap;
    }
    c->free_of[k].addr[c->free_of[k].n++] = addr;
    c->allocated -= csize;
    return 0;
}

static int class_init(class_alloc *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 2; i++) c->top[i] = c->base[i] = (uint64_t)(i + 1) << 40;
    return map_init(&c->map);
}

static uint64_t class_reserved(const class_alloc *c) {
    return c->top[0] - c->base[0] + c->top[1] - c->base[1];
}

/* Whether, with everything freed, every byte the ranges grew by lies in a class's stack. */
static int class_consistent(const class_alloc *c) {
    uint64_t held = 0;
    for (unsigned k = 0; k < NBINS; k++) {
        uint64_t size = k < 64 ? (uint64_t)k << 9 : (uint64_t)(32 + (k - 64) % 32) << ((k - 64) / 32 + 1) << 9;
        held += c->free_of[k].n * size;
    }
    return !c->allocated && held == class_reserved(c);
}

static void class_destroy(class_alloc *c) {
    for (unsigned k = 0; k < NBINS; k++) free(c->free_of[k].addr);
    free(c->map.slots);
}

/* ---- the workload, through either ------------------------------------------------------ */

/* What run_once times: vram, the floor allocator, the size-class allocator, or no allocator
 * (the harness alone). */
typedef enum { RUN_VRAM, RUN_FLOOR, RUN_CLASSES, RUN_HARNESS, RUN_KINDS } run_kind;

/* The allocators the workload runs through. */
typedef struct contenders {
    vram_allocator *vram;
    floor_alloc floor;
    class_alloc classes;
} contenders;

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
static double run_once(run_kind kind, contenders *on, size_range range) {
    enum { SLOTS = 1000, OPS = 200000 };
    static void *slot[SLOTS];
    uint64_t xs = VRAM_BENCH_SEED;
    int failed = 0;
    double t0 = vram_bench_now_ns();
    for (int op = 0; op < OPS; op++) {
        uint64_t k = vram_bench_next(&xs) % SLOTS;
        if (slot[k]) {
            if (kind == RUN_VRAM) vram_allocator_free(on->vram, slot[k]);
            else if (kind == RUN_FLOOR) floor_free(&on->floor, slot[k]);
            else if (kind == RUN_CLASSES) failed |= class_free(&on->classes, slot[k]) != 0;
            slot[k] = NULL;
        } else {
            uint64_t size = draw_size(&xs, range);
            if (kind == RUN_VRAM) failed |= vram_allocator_malloc(on->vram, (size_t)size, 0, VRAM_TAG_OTHER, &slot[k]) != VRAM_OK;
            else if (kind == RUN_FLOOR) failed |= (slot[k] = floor_malloc(&on->floor, size)) == NULL;
            else if (kind == RUN_CLASSES) failed |= (slot[k] = class_malloc(&on->classes, size)) == NULL;
            else slot[k] = (void *)(uintptr_t)(size | 1);
        }
    }
    double ns = (vram_bench_now_ns() - t0) / OPS;
    for (int k = 0; k < SLOTS; k++) {
        if (slot[k] && kind == RUN_VRAM) vram_allocator_free(on->vram, slot[k]);
        else if (slot[k] && kind == RUN_FLOOR) floor_free(&on->floor, slot[k]);
        else if (slot[k] && kind == RUN_CLASSES) failed |= class_free(&on->classes, slot[k]) != 0;
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
    static contenders on; /* large: the class stacks' heads */
    if (vram_device_open(spec, &dev) != VRAM_OK || vram_allocator_new(dev, NULL, &on.vram) != VRAM_OK) {
        fprintf(stderr, "bench_random_floor: %s: %s\n", spec, vram_last_error());
        if (dev) vram_device_close(dev);
        return 1;
    }
    if (floor_init(&on.floor) != 0 || class_init(&on.classes) != 0) {
        fprintf(stderr, "bench_random_floor: host out of memory\n");
        return 1;
    }
    vram_machine_print(stdout, argc, argv);
    printf("device:  %s (%s), for vram\n\n", spec, dev->name);
    double ns[RUN_KINDS][99];
    for (run_kind k = 0; k < RUN_KINDS; k++) run_once(k, &on, range); /* the untimed warm-up runs */
    for (int r = 0; r < runs; r++) { /* in turns, so that all see the same machine */
        for (run_kind k = 0; k < RUN_KINDS; k++) {
            ns[k][r] = run_once(k, &on, range);
            if (ns[k][r] < 0) {
                fprintf(stderr, "bench_random_floor: an allocation failed (%s)\n",
                        k == RUN_VRAM ? vram_last_error() : "host out of memory");
                return 1;
            }
        }
    }
    if (!floor_consistent(&on.floor) || !class_consistent(&on.classes)) {
        fprintf(stderr, "bench_random_floor: the %s allocator is inconsistent after the runs (a bug in it)\n",
                floor_consistent(&on.floor) ? "size-class" : "floor");
        return 1;
    }
    vram_stats st;
    vram_allocator_get_stats(on.vram, &st);
    double med[RUN_KINDS];
    for (run_kind k = 0; k < RUN_KINDS; k++) {
        qsort(ns[k], (size_t)runs, sizeof ns[k][0], vram_bench_cmp_double);
        med[k] = ns[k][runs / 2];
    }
    static const char *const row_names[RUN_KINDS] = {
        "vram", "floor (best fit in the same bins, nothing else)",
        "size classes (no search, split or merge; up to 1/32 rounding)", "harness (the loop, no allocator)"};
    const double reserved[RUN_KINDS] = {(double)st.reserved_bytes[0].peak,
                                        (double)(on.floor.pools[0].reserved_peak + on.floor.pools[1].reserved_peak),
                                        (double)class_reserved(&on.classes), 0};
    const double allocated[RUN_KINDS] = {(double)st.allocated_bytes[0].peak, (double)on.floor.allocated_peak,
                                         (double)on.classes.allocated_peak, 0};
    printf("The random workload, warm, %d runs of 200000 operations each, in turns; ns per operation, "
           "harness included; sizes: %s.\n\n", runs, range_names[range]);
    printf("| allocator | ns per op, median | min | max | peak reserved | peak allocated |\n|---|---|---|---|---|---|\n");
    for (run_kind k = 0; k < RUN_KINDS; k++) {
        printf("| %s | %.1f | %.1f | %.1f |", row_names[k], med[k], ns[k][0], ns[k][runs - 1]);
        if (k == RUN_HARNESS) printf(" - | - |\n");
        else printf(" %.2f GB | %.2f GB |\n", reserved[k] / 1e9, allocated[k] / 1e9);
    }
    double h = med[RUN_HARNESS];
    printf("\nvram / floor: %.2f\n", med[RUN_VRAM] / med[RUN_FLOOR]);
    printf("less the harness: vram %.1f ns, floor %.1f ns an operation; vram / floor %.2f\n", med[RUN_VRAM] - h,
           med[RUN_FLOOR] - h, (med[RUN_VRAM] - h) / (med[RUN_FLOOR] - h));
    printf("size classes, less the harness: %.1f ns an operation, %.2f of the floor's; peak reserved %.2f of the floor's\n",
           med[RUN_CLASSES] - h, (med[RUN_CLASSES] - h) / (med[RUN_FLOOR] - h), reserved[RUN_CLASSES] / reserved[RUN_FLOOR]);
    floor_destroy(&on.floor);
    class_destroy(&on.classes);
    vram_allocator_destroy(on.vram);
    vram_device_close(dev);
    return 0;
}

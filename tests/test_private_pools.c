/* test_private_pools.c — private pools for CUDA graph captures (vram_allocator_begin_pool,
 * end_pool, release_pool), case by case and under a randomized sequence.
 *
 * What a graph needs: the addresses its capture allocated stay its own until the graph is
 * released, even after the tensors that held them are freed, because a replay writes to them.
 * So: a block allocated during a capture and freed (during or after the capture) is never
 * handed to an allocation outside a capture into its pool, empty_cache keeps it mapped, a later
 * capture into the same pool on the same stream reuses it, and releasing the pool's last graph
 * gives everything back. During a capture the allocator makes none of the calls the driver
 * refuses then (event records, queries and waits; unmapping or freeing memory): the event
 * device counts them. Where the device says which streams a capture records, only their
 * allocations are the pool's; captures under way at once each take their own streams'. A pool's
 * checkpoint (pool_blocks) recreates its freed blocks at their addresses (pool_recreate) and
 * refuses what it cannot, changing nothing. Both memory models; bad calls get a status and
 * change nothing. Under the randomized sequence, with
 * the streams' work queued and completed too (so that busy pages move), no page leaves a live
 * graph's memory (the event device's physical model shows every unmap and drop), checkpoints
 * taken and recreated among the operations carve only their own pool's memory, and, with blocks
 * recorded on other streams (record_stream) and freed during captures or outside them, no
 * ordinary block reaches a stream, nor loses its pages, while another stream's queued work may
 * still use it (fakes/stream_hazards.h; before 2026-12-04 the end of a capture freed such blocks
 * with no event: 34-286 violations a configuration).
 */
#include <string.h>

#include "check.h"
#include "fakes/event_device.h"
#include "fakes/stream_hazards.h"
#include "test_rng.h"
#include "vram/alloc.h"
#include "vram/snapshot.h"

#define MiB (1024ull * 1024ull)

/* An allocator with configuration `conf` on a 1 GiB event device, or NULL (a failed check). */
static vram_allocator *open_alloc(const char *conf, vram_device **dev) {
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    vram_allocator *a = NULL;
    *dev = NULL;
    if (vram_alloc_config_parse(conf, &cfg) != VRAM_OK || event_device_open("1GiB", dev) != VRAM_OK ||
        vram_allocator_new(*dev, &cfg, &a) != VRAM_OK) {
        if (*dev) vram_device_close(*dev);
        a = NULL;
    }
    CHECK(a != NULL, "%s: allocator: %s", conf, a ? "" : vram_last_error());
    return a;
}

static void close_alloc(vram_allocator *a, vram_device *dev) {
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

static int64_t allocated(vram_allocator *a) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    return st.allocated_bytes[0].current;
}

static int64_t reserved(vram_allocator *a) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    return st.reserved_bytes[0].current;
}

/* Allocates n blocks of `size` on stream s at once, then frees them: how many overlap
 * [lo, lo + len). */
static int lands_in(vram_allocator *a, uint64_t size, vram_stream s, void *lo, uint64_t len, int n) {
    void *got[64];
    int hits = 0;
    for (int i = 0; i < n; i++) {
        CHECK_OK(vram_allocator_malloc(a, size, s, 0, &got[i]));
        hits += (uintptr_t)got[i] < (uintptr_t)lo + len && (uintptr_t)lo < (uintptr_t)got[i] + size;
    }
    for (int i = 0; i < n; i++) CHECK_OK(vram_allocator_free(a, got[i]));
    return hits;
}

/* Allocates n blocks of `size` on stream 0 at once, outside any capture: whether one of them
 * overlaps the block of `size` bytes at p. */
static int hands_out(vram_allocator *a, uint64_t size, void *p, int n) { return lands_in(a, size, 0, p, size, n) > 0; }

static void test_capture_keeps_its_memory(const char *conf) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    void *warm;
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &warm)); /* a cached block the capture may take */
    CHECK_OK(vram_allocator_free(a, warm));

    CHECK_OK(vram_allocator_begin_pool(a, 7));
    void *x, *tmp, *small, *again;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 0, 0, &x));
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &tmp));
    CHECK_OK(vram_allocator_malloc(a, 512, 0, 0, &small));
    CHECK_OK(vram_allocator_free(a, tmp)); /* a temporary of the captured work */
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &again));
    CHECK(again == tmp, "%s: within a capture the pool's freed block serves its size again", conf);
    CHECK_OK(vram_allocator_end_pool(a, 7));
    CHECK_OK(vram_allocator_check(a));
    vram_snapshot *snap;
    CHECK_OK(vram_allocator_snapshot(a, &snap));
    int in_pool = 0, wrong = 0; /* the snapshot names the pool of the graph's blocks, and of no other */
    for (size_t i = 0; snap && i < snap->num_blocks; i++) {
        uint64_t addr = snap->blocks[i].address;
        int graphs = addr == (uintptr_t)x || addr == (uintptr_t)again || addr == (uintptr_t)small;
        in_pool += graphs && snap->blocks[i].graph_pool == 7;
        wrong += !graphs && snap->blocks[i].graph_pool != 0;
    }
    CHECK(in_pool == 3 && wrong == 0, "%s: snapshot: %d of the graph's 3 blocks in pool 7, %d others in a pool", conf,
          in_pool, wrong);
    vram_snapshot_free(snap);

    /* after the capture the program frees the graph's tensors; their memory stays the graph's */
    int64_t before = allocated(a);
    CHECK_OK(vram_allocator_free(a, x));
    CHECK_OK(vram_allocator_free(a, again));
    CHECK_OK(vram_allocator_free(a, small));
    CHECK(allocated(a) == before - (int64_t)(4 * MiB) - 512, "%s: freed pool blocks are not allocated (%lld)", conf,
          (long long)allocated(a));
    CHECK(!hands_out(a, 1 * MiB, x, 32) && !hands_out(a, 3 * MiB, tmp, 32) && !hands_out(a, 512, small, 32),
          "%s: blocks of a live graph's pool never serve the rest of the program", conf);
    CHECK_OK(vram_allocator_empty_cache(a));
    CHECK(reserved(a) >= (int64_t)(4 * MiB), "%s: empty_cache keeps the pool's memory (%lld reserved)", conf,
          (long long)reserved(a));
    CHECK_OK(vram_allocator_check(a)); /* includes: the pool's free blocks lie on mapped pages */

    /* a second graph captured into the same pool reuses the pool's blocks on the same stream only */
    CHECK_OK(vram_allocator_begin_pool(a, 7));
    void *other_stream, *same_stream;
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 2, 0, &other_stream));
    CHECK(other_stream != tmp, "%s: a pool block freed on stream 0 does not serve stream 2", conf);
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &same_stream));
    CHECK(same_stream == tmp, "%s: the second capture into the pool reuses its block", conf);
    CHECK_OK(vram_allocator_end_pool(a, 7));
    CHECK_OK(vram_allocator_free(a, other_stream));
    CHECK_OK(vram_allocator_free(a, same_stream));

    /* two graphs use pool 7: releasing one keeps it, releasing the other gives everything back */
    CHECK_OK(vram_allocator_release_pool(a, 7));
    CHECK(!hands_out(a, 3 * MiB, tmp, 32), "%s: the pool outlives its first released graph", conf);
    CHECK_OK(vram_allocator_release_pool(a, 7));
    CHECK(vram_allocator_release_pool(a, 7) == VRAM_ERR_NOT_FOUND, "%s: a released pool is gone", conf);
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_empty_cache(a));
    CHECK(reserved(a) == 0 && allocated(a) == 0, "%s: after the release nothing is held (%lld reserved)", conf,
          (long long)reserved(a));

    /* a pool released while one of its blocks is live: the block returns when it is freed */
    CHECK_OK(vram_allocator_begin_pool(a, 9));
    void *kept;
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &kept));
    CHECK_OK(vram_allocator_end_pool(a, 9));
    CHECK_OK(vram_allocator_release_pool(a, 9));
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_free(a, kept));
    CHECK(vram_allocator_free(a, kept) == VRAM_ERR_NOT_FOUND, "%s: double free refused", conf);
    CHECK_OK(vram_allocator_empty_cache(a));
    CHECK(reserved(a) == 0, "%s: the last block of a released pool went back (%lld reserved)", conf,
          (long long)reserved(a));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

/* Where the device says which streams a capture records, only their allocations are the pool's
 * (as PyTorch routes them); a stream the capture does not record allocates from the ordinary
 * cache meanwhile, and its blocks, freed, serve the program again. Where the device cannot tell
 * (the legacy default stream, or no stream_capture), every allocation is the pool's. The same
 * whether the device names the capture or only says that a stream captures, and whether the
 * capture was named (bind_pool) or not. */
static void test_capture_routes_by_stream(const char *conf) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    evdev_state *e = event_device_state(dev);
    for (int tells = 0; tells < 4; tells++) { /* 3: names the capture, and the capture is bound */
        e->capture_tells = tells < 3 ? tells : 2;
        memset(e->capture_of, 0, sizeof e->capture_of);
        CHECK_OK(vram_allocator_begin_pool(a, 5));
        e->capturing = 1;
        e->capture_of[1] = 77; /* stream 1 is recorded */
        if (tells == 3) CHECK_OK(vram_allocator_bind_pool(a, 5, 1));
        void *in, *side, *forked;
        CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 1, 0, &in));
        CHECK_OK(vram_allocator_malloc(a, 5 * MiB, 2, 0, &side));
        e->capture_of[3] = 77; /* the capture forks onto stream 3 */
        CHECK_OK(vram_allocator_malloc(a, 7 * MiB, 3, 0, &forked));
        CHECK_OK(vram_allocator_free(a, side)); /* freed during the capture, on its own stream */
        e->capturing = 0;
        CHECK(e->capture_violations == 0, "%s: no event or release call during the capture", conf);
        CHECK_OK(vram_allocator_end_pool(a, 5));
        memset(e->capture_of, 0, sizeof e->capture_of);
        CHECK_OK(vram_allocator_free(a, in));
        CHECK_OK(vram_allocator_free(a, forked));
        CHECK_OK(vram_allocator_check(a));
        const char *how[] = {"cannot tell", "tells whether", "names the capture", "names the bound capture"};
        CHECK(!lands_in(a, 2 * MiB, 1, in, 3 * MiB, 40) && !lands_in(a, 2 * MiB, 3, forked, 7 * MiB, 40),
              "%s, device %s: the capture's blocks stay the graph's", conf, how[tells]);
        int reused = lands_in(a, 2 * MiB, 2, side, 5 * MiB, 40);
        CHECK(tells ? reused > 0 : reused == 0, "%s, device %s: %d of 40 blocks of the side stream lie where its "
              "block freed during the capture was (that memory %s)", conf, how[tells], reused,
              tells ? "serves the program again" : "is kept for the graph");
        CHECK_OK(vram_allocator_release_pool(a, 5));
        CHECK_OK(vram_allocator_empty_cache(a));
        CHECK(reserved(a) == 0 && allocated(a) == 0, "%s: all returned after the release (%lld)", conf,
              (long long)reserved(a));
    }
    e->capture_tells = 0;
    close_alloc(a, dev);
}

/* route_pool: a stream's allocations go to a pool outside any capture (CUDA graph trees run a
 * graph's warm-up and copy its inputs so), and stay the pool's when freed; other streams'
 * allocations meanwhile, and the stream's own after end_pool, are ordinary. A capture into
 * another pool under way at the same time keeps its own streams. Bad calls are refused. */
static void test_route_pool(const char *conf) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    evdev_state *e = event_device_state(dev);
    e->capture_tells = 2;
    memset(e->capture_of, 0, sizeof e->capture_of);
    CHECK(vram_allocator_route_pool(a, 6, 1) == VRAM_ERR_STATE, "%s: route_pool needs a begun pool", conf);
    CHECK_OK(vram_allocator_begin_pool(a, 6));
    CHECK_OK(vram_allocator_route_pool(a, 6, 1)); /* stream 1: not capturing, as the device says */
    CHECK(vram_allocator_route_pool(a, 6, 2) == VRAM_ERR_STATE, "%s: one stream per begin_pool", conf);
    CHECK(vram_allocator_bind_pool(a, 6, 1) == VRAM_ERR_STATE, "%s: a routed begin_pool is not a capture to name", conf);
    CHECK_OK(vram_allocator_begin_pool(a, 8)); /* a capture into pool 8 on stream 3 meanwhile */
    e->capturing = 1;
    e->capture_of[3] = 55;
    CHECK_OK(vram_allocator_bind_pool(a, 8, 3));
    void *warm, *tmp, *other, *captured;
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 1, 0, &warm));
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB, 1, 0, &tmp));
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 2, 0, &other));
    CHECK_OK(vram_allocator_malloc(a, 6 * MiB, 3, 0, &captured));
    CHECK_OK(vram_allocator_free(a, tmp)); /* the warm-up's temporary */
    CHECK_OK(vram_allocator_end_pool(a, 8));
    e->capturing = 0;
    e->capture_of[3] = 0;
    CHECK_OK(vram_allocator_end_pool(a, 6));
    CHECK(e->capture_violations == 0, "%s: no event or release call while routed or capturing", conf);
    vram_snapshot *snap;
    CHECK_OK(vram_allocator_snapshot(a, &snap));
    uint64_t pool_of[4] = {99, 99, 99, 99};
    void *const which[4] = {warm, tmp, other, captured};
    for (size_t i = 0; snap && i < snap->num_blocks; i++)
        for (int k = 0; k < 4; k++)
            if (snap->blocks[i].address == (uintptr_t)which[k]) pool_of[k] = snap->blocks[i].graph_pool;
    vram_snapshot_free(snap);
    CHECK(pool_of[0] == 6 && pool_of[1] == 6 && pool_of[2] == 0 && pool_of[3] == 8,
          "%s: routed stream's blocks (live and freed) in pool 6, another stream's in none, the capture's in 8: "
          "%llu %llu %llu %llu", conf, (unsigned long long)pool_of[0], (unsigned long long)pool_of[1],
          (unsigned long long)pool_of[2], (unsigned long long)pool_of[3]);
    CHECK(!hands_out(a, 5 * MiB, tmp, 32), "%s: the routed stream's freed block stays the pool's", conf);
    void *after;
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 1, 0, &after));
    CHECK(!((uintptr_t)after < (uintptr_t)tmp + 5 * MiB && (uintptr_t)tmp < (uintptr_t)after + 2 * MiB),
          "%s: after end_pool the stream allocates from the ordinary cache", conf);
    CHECK_OK(vram_allocator_check(a));
    void *const live[4] = {warm, other, captured, after};
    for (int k = 0; k < 4; k++) CHECK_OK(vram_allocator_free(a, live[k]));
    for (uint64_t id = 6; id <= 8; id += 2) CHECK_OK(vram_allocator_release_pool(a, id));
    CHECK_OK(vram_allocator_empty_cache(a));
    int64_t left = reserved(a) + allocated(a);
    close_alloc(a, dev);
    CHECK(left == 0, "%s: all returned after the releases (%lld bytes left)", conf, (long long)left);
}

/* Checkpoints (pool_blocks, pool_recreate: CUDA graph trees' getCheckpointState and
 * setCheckpointPoolState): blocks of a pool freed after its checkpoint are carved again at
 * their addresses, as they were, and the others stay; the recreated blocks are allocated as any
 * (statistics, the invariants), freed they stay the pool's. A list that names a block the pool
 * has allocated and not listed, memory that is not the pool's free memory, overlapping or
 * misaligned blocks, a routed pool or a released one is refused and changes nothing. */
static int pool_blocks_equal(const vram_pool_block *x, size_t nx, const vram_pool_block *y, size_t ny) {
    if (nx != ny) return 0;
    for (size_t k = 0; k < nx; k++)
        if (x[k].addr != y[k].addr || x[k].size != y[k].size || x[k].requested != y[k].requested ||
            x[k].stream != y[k].stream || x[k].tag != y[k].tag)
            return 0;
    return 1;
}

static void test_pool_checkpoint(const char *conf) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    const uint64_t sizes[6] = {3 * MiB, 700 * 1024, 5 * MiB + 512, 2 * MiB, 4096, 9 * MiB};
    void *p[6];
    CHECK_OK(vram_allocator_begin_pool(a, 5));
    for (int k = 0; k < 6; k++) CHECK_OK(vram_allocator_malloc(a, sizes[k], 0, (vram_tag)(k % 3), &p[k]));
    CHECK_OK(vram_allocator_end_pool(a, 5));
    vram_pool_block ck[8], now[8];
    size_t n = 0, m = 0;
    CHECK_OK(vram_allocator_pool_blocks(a, 5, ck, 2, &n));
    CHECK(n == 6, "%s: six blocks in the pool (%zu), counted past the room given", conf, n);
    CHECK_OK(vram_allocator_pool_blocks(a, 5, ck, 8, &n));
    int64_t before = allocated(a);
    for (int k = 0; k < 6; k++)
        if (k != 1) CHECK_OK(vram_allocator_free(a, p[k]));
    CHECK_OK(vram_allocator_pool_blocks(a, 5, now, 8, &m));
    CHECK(m == 1 && now[0].addr == (uintptr_t)p[1], "%s: one block left allocated (%zu)", conf, m);
    unsigned char created[8];
    CHECK_OK(vram_allocator_pool_recreate(a, 5, ck, n, created));
    int right = 1;
    for (size_t k = 0; k < n; k++) right &= created[k] == (ck[k].addr != (uintptr_t)p[1]);
    CHECK(right, "%s: the freed blocks recreated, the live one kept", conf);
    CHECK_OK(vram_allocator_pool_blocks(a, 5, now, 8, &m));
    CHECK(pool_blocks_equal(ck, n, now, m), "%s: the pool's blocks are the checkpoint's again", conf);
    CHECK(allocated(a) == before, "%s: allocated %lld, as at the checkpoint %lld", conf, (long long)allocated(a),
          (long long)before);
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_pool_recreate(a, 5, ck, n, created));
    right = 1;
    for (size_t k = 0; k < n; k++) right &= !created[k];
    CHECK(right, "%s: recreating an unchanged pool keeps every block", conf);

    /* refused, changing nothing */
    CHECK_OK(vram_allocator_free(a, p[0]));
    CHECK_OK(vram_allocator_free(a, p[2]));
    CHECK_OK(vram_allocator_begin_pool(a, 5));
    void *taker;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB + 512, 0, 0, &taker)); /* from the pool's freed memory */
    CHECK(vram_allocator_pool_recreate(a, 5, ck, n, NULL) == VRAM_ERR_STATE,
          "%s: refused while a capture allocates into the pool", conf);
    CHECK_OK(vram_allocator_end_pool(a, 5));
    CHECK(vram_allocator_pool_recreate(a, 5, ck, n, NULL) == VRAM_ERR_STATE,
          "%s: refused: an allocated block of the pool is not in the checkpoint", conf);
    CHECK_OK(vram_allocator_free(a, taker));
    void *ordinary;
    CHECK_OK(vram_allocator_malloc(a, 6 * MiB, 1, 0, &ordinary));
    vram_pool_block bad[2] = {ck[1], {(uintptr_t)ordinary, 6 * MiB, 6 * MiB, 1, 0}};
    CHECK(vram_allocator_pool_recreate(a, 5, bad, 2, NULL) == VRAM_ERR_STATE,
          "%s: refused: memory outside the pool", conf);
    vram_pool_block overlap[2] = {ck[0], ck[0]};
    overlap[1].addr += 512;
    CHECK(vram_allocator_pool_recreate(a, 5, overlap, 2, NULL) == VRAM_ERR_INVALID_ARG, "%s: overlapping blocks", conf);
    vram_pool_block odd = ck[0];
    odd.addr += 100;
    CHECK(vram_allocator_pool_recreate(a, 5, &odd, 1, NULL) == VRAM_ERR_INVALID_ARG, "%s: a misaligned block", conf);
    odd = ck[0];
    odd.requested = odd.size + 1;
    CHECK(vram_allocator_pool_recreate(a, 5, &odd, 1, NULL) == VRAM_ERR_INVALID_ARG, "%s: more asked than held", conf);
    CHECK(vram_allocator_pool_recreate(a, 5, NULL, 3, NULL) == VRAM_ERR_INVALID_ARG, "%s: no list", conf);
    CHECK(vram_allocator_pool_recreate(a, 9, ck, n, NULL) == VRAM_ERR_NOT_FOUND, "%s: an unknown pool", conf);
    CHECK_OK(vram_allocator_pool_blocks(a, 5, now, 8, &m));
    CHECK(m == 4, "%s: the refusals changed nothing (%zu blocks)", conf, m);
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_pool_recreate(a, 5, ck, n, created));
    right = 1;
    for (size_t k = 0; k < n; k++) right &= created[k] == (ck[k].addr == (uintptr_t)p[0] || ck[k].addr == (uintptr_t)p[2]);
    CHECK(right, "%s: the two freed blocks recreated, the others kept", conf);
    CHECK_OK(vram_allocator_check(a));

    /* recreated blocks are the pool's: freed, they serve nothing else; released, all returns */
    for (int k = 0; k < 6; k++) CHECK_OK(vram_allocator_free(a, p[k]));
    CHECK(!hands_out(a, 3 * MiB, p[0], 16), "%s: a recreated block, freed, stays the pool's", conf);
    CHECK_OK(vram_allocator_free(a, ordinary));
    CHECK_OK(vram_allocator_release_pool(a, 5));
    CHECK_OK(vram_allocator_release_pool(a, 5)); /* (begun twice) */
    CHECK(vram_allocator_pool_blocks(a, 5, now, 8, &m) == VRAM_ERR_NOT_FOUND, "%s: a released pool has no blocks", conf);
    CHECK(vram_allocator_pool_recreate(a, 5, ck, n, NULL) == VRAM_ERR_NOT_FOUND, "%s: nor a checkpoint", conf);
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_empty_cache(a));
    int64_t left = reserved(a) + allocated(a);
    close_alloc(a, dev);
    CHECK(left == 0, "%s: all returned after the release (%lld bytes left)", conf, (long long)left);
}

/* Is p among the n addresses of `set`? */
static int among(void *const *set, int n, void *p) {
    for (int i = 0; i < n; i++)
        if (set[i] == p) return 1;
    return 0;
}

/* The concurrent-capture test's sizes: block i of a capture has CONCURRENT_SIZE(i) bytes. */
#define CONCURRENT_SIZE(i) ((uint64_t)((i) % 6 + 1) * 640 * 1024)

/* Does [p, p + size) overlap a block of `set` (block i: CONCURRENT_SIZE(i) bytes)? */
static int overlaps(void *const *set, int n, void *p, uint64_t size) {
    uintptr_t lo = (uintptr_t)p, hi = lo + size;
    for (int i = 0; i < n; i++)
        if (lo < (uintptr_t)set[i] + CONCURRENT_SIZE(i) && (uintptr_t)set[i] < hi) return 1;
    return 0;
}

/* Two captures under way at once (two threads capturing, as PyTorch allows), on streams 1 and 2,
 * into pools 11 and 12: each allocation goes to the pool of the capture its stream records, a
 * pool's freed blocks serve only its own captures, stream 3 (capturing nothing) allocates as
 * usual, and one capture ends while the other goes on. With `bound`, both captures are named
 * (bind_pool); without, only the second: the first takes what no named capture records. */
static void test_concurrent_captures(const char *conf, int bound) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    evdev_state *e = event_device_state(dev);
    e->capture_tells = 2;
    CHECK_OK(vram_allocator_begin_pool(a, 11));
    e->capturing = 1;
    e->capture_of[1] = 101;
    if (bound) CHECK_OK(vram_allocator_bind_pool(a, 11, 1));
    CHECK_OK(vram_allocator_begin_pool(a, 12));
    e->capture_of[2] = 102;
    CHECK_OK(vram_allocator_bind_pool(a, 12, 2));
    enum { N = 24 };
    void *one[N], *two[N], *plain[N];
    for (int i = 0; i < N; i++) { /* interleaved, as two threads would */
        uint64_t size = CONCURRENT_SIZE(i);
        CHECK_OK(vram_allocator_malloc(a, size, 1, 0, &one[i]));
        CHECK_OK(vram_allocator_malloc(a, size, 2, 0, &two[i]));
        CHECK_OK(vram_allocator_malloc(a, size, 3, 0, &plain[i]));
    }
    for (int i = 0; i < N; i += 2) { /* each capture frees half of its temporaries */
        CHECK_OK(vram_allocator_free(a, one[i]));
        CHECK_OK(vram_allocator_free(a, two[i]));
        CHECK_OK(vram_allocator_free(a, plain[i]));
    }
    int crossed = 0, own = 0;
    void *one0[N], *two0[N]; /* the blocks as first allocated */
    memcpy(one0, one, sizeof one0);
    memcpy(two0, two, sizeof two0);
    for (int i = 0; i < N; i += 2) { /* the same sizes again, on each stream */
        uint64_t size = CONCURRENT_SIZE(i);
        void *p1, *p2;
        CHECK_OK(vram_allocator_malloc(a, size, 1, 0, &p1));
        CHECK_OK(vram_allocator_malloc(a, size, 2, 0, &p2));
        crossed += among(two0, N, p1) + among(one0, N, p2) + among(plain, N, p1) + among(plain, N, p2);
        own += among(one0, N, p1) + among(two0, N, p2);
        one[i] = p1;
        two[i] = p2;
    }
    CHECK(crossed == 0, "%s%s: %d allocations of one capture got memory of the other or of the program", conf,
          bound ? "" : " (first capture unnamed)", crossed);
    CHECK(own == N, "%s: each capture reuses its own freed blocks (%d of %d)", conf, own, N);
    CHECK(vram_allocator_release_pool(a, 11) == VRAM_ERR_STATE, "%s: release of a pool being captured into", conf);
    e->capture_of[1] = 0; /* the first capture ends; the second goes on */
    CHECK_OK(vram_allocator_end_pool(a, 11));
    CHECK_OK(vram_allocator_check(a));
    for (int i = 0; i < N; i++) CHECK_OK(vram_allocator_free(a, one[i]));
    void *p;
    CHECK_OK(vram_allocator_malloc(a, 640 * 1024, 2, 0, &p));
    CHECK(!overlaps(one, N, p, 640 * 1024), "%s: the second capture does not take the first graph's memory", conf);
    CHECK_OK(vram_allocator_free(a, p));
    CHECK(e->capture_violations == 0, "%s: %llu event or release calls while a capture was under way", conf,
          (unsigned long long)e->capture_violations);
    e->capture_of[2] = 0;
    e->capturing = 0;
    CHECK_OK(vram_allocator_end_pool(a, 12));
    for (int i = 0; i < N; i++) CHECK_OK(vram_allocator_free(a, two[i]));
    for (int i = 1; i < N; i += 2) CHECK_OK(vram_allocator_free(a, plain[i]));
    /* The graph begun last is released: its memory serves the program again, the first graph's
     * stays its own. (Were every capturing stream's allocations the newest capture's, pool 12
     * would hold the first capture's blocks too and hand them out now.) */
    CHECK_OK(vram_allocator_release_pool(a, 12));
    void *after[3 * N];
    int leaked = 0, reused = 0;
    for (int k = 0; k < 3 * N; k++) { /* on each stream, each size */
        uint64_t size = CONCURRENT_SIZE(k % N);
        CHECK_OK(vram_allocator_malloc(a, size, (vram_stream)(1 + k / N), 0, &after[k]));
        leaked += overlaps(one, N, after[k], size);
        reused += overlaps(two, N, after[k], size);
    }
    CHECK(leaked == 0, "%s%s: %d ordinary allocations got memory of the live graph", conf,
          bound ? "" : " (first capture unnamed)", leaked);
    CHECK(reused > 0, "%s: the released graph's memory serves the program again", conf);
    for (int k = 0; k < 3 * N; k++) CHECK_OK(vram_allocator_free(a, after[k]));
    CHECK_OK(vram_allocator_release_pool(a, 11));
    CHECK_OK(vram_allocator_empty_cache(a));
    CHECK(reserved(a) == 0 && allocated(a) == 0, "%s: all returned after the releases (%lld)", conf,
          (long long)reserved(a));
    CHECK_OK(vram_allocator_check(a));
    e->capture_tells = 0;
    close_alloc(a, dev);
}

/* Within a pool, freed neighbours (same stream) merge, and a larger free block serves a smaller
 * request by splitting: a captured step reuses its own memory as an ordinary cache would. */
static void test_pool_splits_and_merges(const char *conf) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    CHECK_OK(vram_allocator_begin_pool(a, 4));
    void *x, *y, *guard, *big, *rest, *other;
    CHECK_OK(vram_allocator_malloc(a, 8 * MiB, 0, 0, &x));
    CHECK_OK(vram_allocator_malloc(a, 8 * MiB, 0, 0, &y));
    CHECK_OK(vram_allocator_malloc(a, 8 * MiB, 0, 0, &guard));
    CHECK((char *)y == (char *)x + 8 * MiB, "%s: two neighbours", conf);
    CHECK_OK(vram_allocator_free(a, x));
    CHECK_OK(vram_allocator_free(a, y));
    CHECK_OK(vram_allocator_check(a));
    void *small;
    CHECK_OK(vram_allocator_malloc(a, 256 * 1024, 0, 0, &small));
    CHECK((char *)small < (char *)x || (char *)small >= (char *)x + 16 * MiB,
          "%s: a small request is not cut from the pool's large block", conf);
    CHECK_OK(vram_allocator_malloc(a, 12 * MiB, 0, 0, &big));
    CHECK(big == x, "%s: the merged 16 MiB serves 12 MiB at its start", conf);
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 0, 0, &rest));
    CHECK((char *)rest == (char *)x + 12 * MiB, "%s: and its split rest serves 4 MiB", conf);
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 1, 0, &other));
    CHECK((char *)other < (char *)x || (char *)other >= (char *)x + 16 * MiB,
          "%s: the pool's blocks do not serve another stream", conf);
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_end_pool(a, 4));
    CHECK_OK(vram_allocator_free(a, big));
    CHECK_OK(vram_allocator_free(a, rest));
    CHECK_OK(vram_allocator_free(a, other));
    CHECK_OK(vram_allocator_free(a, guard));
    CHECK_OK(vram_allocator_free(a, small));
    CHECK_OK(vram_allocator_release_pool(a, 4));
    CHECK_OK(vram_allocator_empty_cache(a));
    CHECK(reserved(a) == 0, "%s: all returned (%lld reserved)", conf, (long long)reserved(a));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

/* During a capture: no event call and no release, whatever the allocator holds; a free of a
 * block used on another stream waits, pending, for the end of the capture; empty_cache and an
 * allocation over the limit fail instead of waiting. */
static void test_capture_needs_no_events(const char *conf) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    evdev_state *e = event_device_state(dev);
    void *busy[8], *side;
    for (int i = 0; i < 8; i++) CHECK_OK(vram_allocator_malloc(a, (i + 1) * MiB, 1, 0, &busy[i]));
    event_device_submit(dev, 1); /* stream 1 is still working on them when they are freed */
    for (int i = 0; i < 8; i++) CHECK_OK(vram_allocator_free(a, busy[i]));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 2, 0, &side));
    CHECK_OK(vram_allocator_record_stream(a, side, 3));
    void *before_capture;
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 2, 0, &before_capture));
    CHECK_OK(vram_allocator_begin_pool(a, 5));
    e->capturing = 1;
    CHECK_OK(vram_allocator_free(a, before_capture)); /* not the pool's: back to the cache, waiting for nothing */
    void *p[300];
    for (int i = 0; i < 300; i++) /* enough requests to reach every slow path and the polling */
        CHECK_OK(vram_allocator_malloc(a, (uint64_t)(i % 13 + 1) * 192 * 1024, 2, 0, &p[i]));
    for (int i = 0; i < 300; i += 2) CHECK_OK(vram_allocator_free(a, p[i]));
    event_device_submit(dev, 3);
    CHECK_OK(vram_allocator_free(a, side)); /* used on stream 3: pending until the capture ends */
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.active_bytes[0].current - st.allocated_bytes[0].current == (int64_t)(2 * MiB),
          "%s: the block used on another stream stays active during the capture", conf);
    CHECK(vram_allocator_empty_cache(a) == VRAM_ERR_STATE, "%s: empty_cache refused during a capture", conf);
    CHECK_OK(vram_allocator_set_limit(a, 64 * MiB));
    void *big;
    CHECK(vram_allocator_malloc(a, 512 * MiB, 2, 0, &big) == VRAM_ERR_OUT_OF_MEMORY,
          "%s: over the limit during a capture: out of memory, without waiting", conf);
    CHECK_OK(vram_allocator_set_limit(a, 0));
    CHECK(e->capture_violations == 0, "%s: %llu event or release calls during the capture", conf,
          (unsigned long long)e->capture_violations);
    e->capturing = 0;
    event_device_complete(dev, 3);
    CHECK_OK(vram_allocator_end_pool(a, 5));
    vram_allocator_get_stats(a, &st);
    CHECK(st.active_bytes[0].current == st.allocated_bytes[0].current, "%s: after the capture the pending free is done",
          conf);
    for (int i = 1; i < 300; i += 2) CHECK_OK(vram_allocator_free(a, p[i]));
    CHECK_OK(vram_allocator_release_pool(a, 5));
    event_device_complete(dev, 1);
    CHECK_OK(vram_allocator_empty_cache(a));
    CHECK(reserved(a) == 0, "%s: everything returned (%lld reserved)", conf, (long long)reserved(a));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

/* A block used on another stream (record_stream) and freed during a capture: no event can be
 * recorded then, so the allocator records them once the last capture has ended, as PyTorch's
 * defers them; until the work that stream queued before the free is done, the block serves no
 * other stream, even with memory at its limit. Before 2026-12-04 the block went back to the cache
 * at the end of the capture with no event (fuzz_alloc found it:
 * tests/fuzz/regress_alloc/capture_use). */
static void test_capture_free_waits_for_uses(const char *conf) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    evdev_state *e = event_device_state(dev);
    void *p, *q = NULL;
    CHECK_OK(vram_allocator_malloc(a, 12 * MiB, 1, 0, &p));
    CHECK_OK(vram_allocator_record_stream(a, p, 2));
    event_device_submit(dev, 2); /* stream 2's queued work still uses p */
    uint64_t target = e->submitted[2];
    CHECK_OK(vram_allocator_begin_pool(a, 7));
    e->capturing = 1;
    CHECK_OK(vram_allocator_free(a, p));
    e->capturing = 0;
    CHECK_OK(vram_allocator_end_pool(a, 7));
    CHECK_OK(vram_allocator_set_limit(a, (uint64_t)reserved(a))); /* no new memory: only p's could serve */
    vram_status st = vram_allocator_malloc(a, 12 * MiB, 3, 0, &q);
    CHECK(st != VRAM_OK || q != p || e->completed[2] >= target,
          "%s: a block freed during a capture went to stream 3 while stream 2's work on it was queued", conf);
    if (st == VRAM_OK) CHECK_OK(vram_allocator_free(a, q));
    event_device_complete(dev, 2);
    CHECK(vram_allocator_malloc(a, 12 * MiB, 3, 0, &q) == VRAM_OK, "%s: once that work is done the memory serves again",
          conf);
    if (q) CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_set_limit(a, 0));
    CHECK_OK(vram_allocator_release_pool(a, 7));
    CHECK_OK(vram_allocator_empty_cache(a));
    CHECK(reserved(a) == 0, "%s: everything returned (%lld reserved)", conf, (long long)reserved(a));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

static void test_bad_calls(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("", &dev);
    if (!a) return;
    CHECK(vram_allocator_begin_pool(NULL, 1) == VRAM_ERR_INVALID_ARG, "null allocator");
    CHECK(vram_allocator_begin_pool(a, 0) == VRAM_ERR_INVALID_ARG, "pool id 0 refused");
    CHECK(vram_allocator_end_pool(a, 1) == VRAM_ERR_STATE, "end without a capture");
    CHECK(vram_allocator_release_pool(a, 1) == VRAM_ERR_NOT_FOUND, "release of an unknown pool");
    CHECK(vram_allocator_bind_pool(a, 1, 1) == VRAM_ERR_STATE, "bind without a capture");
    CHECK_OK(vram_allocator_begin_pool(a, 1));
    CHECK(vram_allocator_bind_pool(a, 1, 1) == VRAM_ERR_UNSUPPORTED && strstr(vram_last_error(), "cannot tell"),
          "bind where the device cannot name captures: %s", vram_last_error());
    evdev_state *e = event_device_state(dev);
    e->capture_tells = 2;
    CHECK(vram_allocator_bind_pool(a, 1, 1) == VRAM_ERR_STATE && strstr(vram_last_error(), "not capturing"),
          "bind to a stream that is not capturing: %s", vram_last_error());
    e->capture_of[1] = 42;
    CHECK_OK(vram_allocator_bind_pool(a, 1, 1));
    CHECK(vram_allocator_bind_pool(a, 1, 1) == VRAM_ERR_STATE && strstr(vram_last_error(), "named already"),
          "a capture is named once: %s", vram_last_error());
    CHECK_OK(vram_allocator_begin_pool(a, 2)); /* a second capture at once */
    CHECK(vram_allocator_bind_pool(a, 2, 1) == VRAM_ERR_STATE && strstr(vram_last_error(), "pool 1 already"),
          "one capture cannot allocate into two pools: %s", vram_last_error());
    CHECK(vram_allocator_end_pool(a, 3) == VRAM_ERR_STATE, "end of a pool no capture goes into");
    CHECK(vram_allocator_release_pool(a, 1) == VRAM_ERR_STATE, "release of the pool being captured into");
    for (uint64_t id = 3; id <= 8; id++) CHECK_OK(vram_allocator_begin_pool(a, id));
    CHECK(vram_allocator_begin_pool(a, 9) == VRAM_ERR_STATE && strstr(vram_last_error(), "captures are under way"),
          "a ninth capture at once is refused: %s", vram_last_error());
    for (uint64_t id = 8; id >= 2; id--) CHECK_OK(vram_allocator_end_pool(a, id));
    CHECK_OK(vram_allocator_end_pool(a, 1));
    CHECK(vram_allocator_end_pool(a, 1) == VRAM_ERR_STATE, "a capture ends once");
    e->capture_of[1] = 0;
    e->capture_tells = 0;
    for (uint64_t id = 9; id <= 16; id++) { /* 16 pools in all */
        CHECK_OK(vram_allocator_begin_pool(a, id));
        CHECK_OK(vram_allocator_end_pool(a, id));
    }
    CHECK(vram_allocator_begin_pool(a, 17) == VRAM_ERR_STATE && strstr(vram_last_error(), "private pools"),
          "a 17th pool is refused: %s", vram_last_error());
    CHECK_OK(vram_allocator_release_pool(a, 5));
    CHECK_OK(vram_allocator_begin_pool(a, 17)); /* a released slot is free again */
    CHECK_OK(vram_allocator_end_pool(a, 17));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

/* Random mallocs and frees on three streams, with captures into three pools begun, ended and
 * released among them. The shadow knows which addresses belong to a pool whose graph is alive:
 * an allocation outside a capture into that pool must never return one of them. */
#define SLOTS 256
/* test_random's record of the memory each pool has handed out while alive (its graphs'
 * memory), and how often pages left such memory (page_unmap, page_drop: a graph's replay would
 * then write memory that is no longer its own). */
enum { POOLS = 3, OWNED = 4096 };
static struct {
    uintptr_t lo, hi; /* [lo, hi): a block the pool handed out */
} owned[POOLS][OWNED];
static int nowned[POOLS], uses[POOLS], unmapped_owned;
/* What the streams may still use of blocks freed outside the pools (fakes/stream_hazards.h), and
 * how often memory was handed to another stream, or its pages taken, before that work was done. */
static stream_hazards hazards;
static uint64_t stream_violations;

static void unmap_of_owned(void *ctx, uint64_t addr, uint64_t size) {
    for (int q = 0; q < POOLS; q++)
        for (int i = 0; uses[q] && i < nowned[q]; i++)
            if (addr < owned[q][i].hi && owned[q][i].lo < addr + size) unmapped_owned++;
    stream_violations += hazards_in_use(&hazards, ctx, addr, size);
}

static void test_random(const char *conf, int routed) {
    vram_device *dev;
    vram_allocator *a = open_alloc(conf, &dev);
    if (!a) return;
    struct {
        void *p;
        uint64_t pool, size;
        unsigned stream, used_on; /* its allocation stream, and streams it was recorded on */
    } slot[SLOTS];
    memset(slot, 0, sizeof slot);
    evdev_state *e = event_device_state(dev);
    memset(nowned, 0, sizeof nowned);
    memset(uses, 0, sizeof uses);
    unmapped_owned = 0;
    stream_violations = 0;
    hazards_init(&hazards);
    e->phys.on_unmap = unmap_of_owned;
    e->phys.ctx = dev;
    int recorded = 0, recreated = 0;
    enum { CK = 64 };
    vram_pool_block ck[POOLS][CK]; /* each pool's last checkpoint */
    size_t nck[POOLS] = {0};
    uint64_t rng = 12345, capturing = 0;
    int violations = 0, reuses = 0, ops = 0;
    for (ops = 0; ops < 200000; ops++) {
        uint64_t r = test_rng(&rng) % 1000;
        if (r < 5 && !capturing) { /* begin a capture */
            capturing = 1 + test_rng(&rng) % POOLS;
            CHECK_OK(vram_allocator_begin_pool(a, capturing));
            uses[capturing - 1]++;
            e->capturing = 1;
            e->capture_tells = routed; /* routed: the capture records stream 1 only */
            e->capture_of[1] = routed ? capturing : 0;
        } else if (r < 10 && capturing) {
            e->capturing = 0;
            CHECK_OK(vram_allocator_end_pool(a, capturing));
            capturing = 0;
        } else if (r < 13) { /* release one graph of a pool (during a capture too, not its last use) */
            int k = (int)(test_rng(&rng) % POOLS);
            int may = uses[k] > (capturing == (uint64_t)k + 1 ? 1 : 0);
            vram_status st = vram_allocator_release_pool(a, (uint64_t)k + 1);
            CHECK(may ? st == VRAM_OK : st != VRAM_OK, "%s: release of pool %d with %d uses -> %s", conf, k + 1, uses[k],
                  vram_status_str(st));
            if (may && !--uses[k]) nowned[k] = 0; /* its memory may serve anything now */
        } else if (r < 20) { /* streams' work: queued (frees then leave busy memory), or done */
            unsigned st = (unsigned)(test_rng(&rng) % 3);
            if (r < 17) event_device_submit(dev, st);
            else event_device_complete(dev, st);
            if (r >= 17 && hazards.nranges > 4096) hazards_prune(&hazards, dev);
        } else if (r < 26) { /* a live block used on another stream too (record_stream) */
            int k = (int)(test_rng(&rng) % SLOTS);
            unsigned st = (unsigned)(test_rng(&rng) % 3);
            if (slot[k].p && vram_allocator_record_stream(a, slot[k].p, st) == VRAM_OK) {
                slot[k].used_on |= 1u << st;
                recorded++;
            }
        } else if (r < 28) { /* a checkpoint of a pool taken */
            int q = (int)(test_rng(&rng) % POOLS);
            if (uses[q]) CHECK_OK(vram_allocator_pool_blocks(a, (uint64_t)q + 1, ck[q], CK, &nck[q]));
            if (nck[q] > CK) nck[q] = 0; /* (more than kept: none) */
        } else if (r < 29) { /* and recreated: the blocks carved again become slots of the pool */
            int q = (int)(test_rng(&rng) % POOLS);
            unsigned char created[CK];
            vram_status st = uses[q] ? vram_allocator_pool_recreate(a, (uint64_t)q + 1, ck[q], nck[q], created) : VRAM_ERR_NOT_FOUND;
            CHECK(st == VRAM_OK || st == VRAM_ERR_STATE || !uses[q], "%s: recreate of pool %d: %s", conf, q + 1,
                  vram_status_str(st));
            for (size_t j = 0; st == VRAM_OK && j < nck[q]; j++) {
                if (!created[j]) continue;
                uintptr_t lo = (uintptr_t)ck[q][j].addr, hi = lo + ck[q][j].size;
                for (int o = 0; o < POOLS; o++)
                    for (int i = 0; o != q && uses[o] && i < nowned[o]; i++)
                        violations += lo < owned[o][i].hi && owned[o][i].lo < hi;
                int k = 0;
                while (k < SLOTS && slot[k].p) k++;
                recreated++;
                if (k == SLOTS) {
                    CHECK_OK(vram_allocator_free(a, (void *)lo));
                    continue;
                }
                slot[k].p = (void *)lo;
                slot[k].pool = (uint64_t)q + 1;
                slot[k].size = ck[q][j].size;
                slot[k].stream = (unsigned)ck[q][j].stream;
                slot[k].used_on = 0;
            }
        } else {
            int k = (int)(test_rng(&rng) % SLOTS);
            if (slot[k].p) {
                if (!slot[k].pool) /* outside the pools: what its streams queued may still use it */
                    for (unsigned u = 0; u < 3; u++)
                        if (u == slot[k].stream || (slot[k].used_on & (1u << u)))
                            hazards_add(&hazards, dev, (uintptr_t)slot[k].p, slot[k].size, u);
                void *freed = slot[k].p;
                slot[k].p = NULL; /* before the free, which may unmap its pages */
                CHECK_OK(vram_allocator_free(a, freed));
            } else {
                int e = 9 + (int)(test_rng(&rng) % 14); /* 512 B ... 8 MiB */
                uint64_t size = (1ull << e) + test_rng(&rng) % (1ull << e);
                vram_stream s = (vram_stream)(test_rng(&rng) % 3);
                if (vram_allocator_malloc(a, size, s, 0, &slot[k].p) != VRAM_OK) {
                    slot[k].p = NULL;
                    continue;
                }
                uint64_t into = capturing && (!routed || s == 1) ? capturing : 0; /* the pool it belongs to */
                slot[k].pool = into;
                size_t bsize = 0;
                CHECK_OK(vram_allocator_block_info(a, slot[k].p, &bsize, NULL, NULL));
                slot[k].size = bsize;
                slot[k].stream = (unsigned)s;
                slot[k].used_on = 0;
                if (!into) { /* an ordinary block: nothing another stream's queued work still uses */
                    uint64_t by_address = 0, by_page = 0;
                    hazards_check_block(&hazards, dev, (uintptr_t)slot[k].p, bsize, (unsigned)s, &by_address, &by_page);
                    stream_violations += by_address + by_page;
                }
                uintptr_t lo = (uintptr_t)slot[k].p, hi = lo + bsize;
                for (int q = 0; q < POOLS; q++) {
                    if (!uses[q]) continue;
                    int mine = into == (uint64_t)q + 1, seen = 0; /* overlaps memory pool q handed out */
                    for (int i = 0; i < nowned[q] && !seen; i++) seen = lo < owned[q][i].hi && owned[q][i].lo < hi;
                    if (seen && !mine) violations++;
                    if (seen && mine) reuses++;
                }
                if (into && nowned[into - 1] < OWNED) {
                    owned[into - 1][nowned[into - 1]].lo = lo;
                    owned[into - 1][nowned[into - 1]++].hi = hi;
                }
            }
        }
        if (ops % 20000 == 0) CHECK_OK(vram_allocator_check(a));
        if (ops % 50000 == 49999 && !capturing) {
            CHECK_OK(vram_allocator_empty_cache(a));
            CHECK_OK(vram_allocator_check(a));
        }
    }
    CHECK(violations == 0, "%s%s: %d allocations outside a capture got memory of a live graph's pool", conf,
          routed ? " (routed by stream)" : "", violations);
    CHECK(unmapped_owned == 0, "%s%s: pages left a live graph's memory %d times", conf, routed ? " (routed by stream)" : "",
          unmapped_owned);
    CHECK(e->capture_violations == 0, "%s: %llu event or release calls during captures", conf,
          (unsigned long long)e->capture_violations);
    CHECK(stream_violations == 0 && recorded > 300,
          "%s%s: %llu times memory reached a stream, or lost its pages, while another stream's work still used it "
          "(%d blocks recorded on other streams)",
          conf, routed ? " (routed by stream)" : "", (unsigned long long)stream_violations, recorded);
    e->capturing = 0;
    e->phys.on_unmap = NULL;
    hazards_free(&hazards);
    for (unsigned st = 0; st < 3; st++) event_device_complete(dev, st);
    CHECK(reuses > 100, "%s: captures reuse their pool's blocks (%d)", conf, reuses);
    CHECK(recreated > 50, "%s: checkpoints recreated freed blocks (%d)", conf, recreated);
    if (capturing) CHECK_OK(vram_allocator_end_pool(a, capturing));
    for (int k = 0; k < SLOTS; k++)
        if (slot[k].p) CHECK_OK(vram_allocator_free(a, slot[k].p));
    for (int q = 0; q < POOLS; q++)
        while (uses[q]--) CHECK_OK(vram_allocator_release_pool(a, (uint64_t)q + 1));
    CHECK_OK(vram_allocator_empty_cache(a));
    CHECK(reserved(a) == 0 && allocated(a) == 0, "%s: everything returned at the end (%lld reserved)", conf,
          (long long)reserved(a));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

int main(void) {
    test_capture_keeps_its_memory("");
    test_capture_keeps_its_memory("expandable_segments:False");
    test_capture_keeps_its_memory("chunk_size_mb:64,move_busy_pages:True");
    test_pool_splits_and_merges("");
    test_pool_splits_and_merges("expandable_segments:False");
    test_capture_needs_no_events("");
    test_capture_needs_no_events("expandable_segments:False");
    test_capture_needs_no_events("chunk_size_mb:64,move_busy_pages:True,reserve_slack:0.01");
    test_capture_needs_no_events("caching:False");
    test_capture_needs_no_events("garbage_collection_threshold:0.01");
    test_capture_free_waits_for_uses("");
    test_capture_free_waits_for_uses("expandable_segments:False");
    test_capture_routes_by_stream("");
    test_capture_routes_by_stream("expandable_segments:False");
    test_capture_routes_by_stream("chunk_size_mb:64,move_busy_pages:True");
    test_route_pool("expandable_segments:True");
    test_route_pool("expandable_segments:False");
    test_pool_checkpoint("");
    test_pool_checkpoint("expandable_segments:False");
    test_pool_checkpoint("chunk_size_mb:64,move_busy_pages:True");
    test_concurrent_captures("", 1);
    test_concurrent_captures("", 0);
    test_concurrent_captures("expandable_segments:False", 1);
    test_concurrent_captures("chunk_size_mb:64,move_busy_pages:True", 0);
    test_bad_calls();
    for (int routed = 0; routed < 2; routed++) {
        test_random("", routed);
        test_random("expandable_segments:False", routed);
        test_random("chunk_size_mb:64,move_busy_pages:True,reserve_slack:0.01", routed);
    }
    return check_done();
}

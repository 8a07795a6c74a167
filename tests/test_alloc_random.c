/* test_alloc_random.c — the allocator against its invariants under long randomized sequences.
 *
 * Millions of operations over several streams (on a device whose stream work the test
 * controls): malloc of log-uniform sizes, free, record_stream, work submitted and completed
 * on streams, empty_cache, caching turned off and on and the options PyTorch's settings reach
 * (garbage collection, size classes, splitting, rounding, growth by pages or by segments) changed
 * at run time, a changing capacity limit (so
 * allocations run out of memory), peak resets. A shadow model of what is live checks, independently of the allocator's own
 * structures:
 *   - no two live blocks overlap, and every block holds its requested size;
 *   - a block freed on stream S (or used on S through record_stream) is never handed to
 *     another stream while S's work queued before the free is unfinished, neither at its
 *     address nor through its physical pages moved elsewhere (page_alias): the device models
 *     what physical page lies under each address (fakes/phys_pages.h);
 *   - no page leaves an address that a live block or unfinished work still uses (page_unmap,
 *     page_drop), every page under a live block is mapped, and no page call is one the
 *     driver would refuse;
 *   - allocated/requested bytes and counts, per pool and per tag, equal the shadow's sums;
 *   - reserved >= allocated; after freeing everything and emptying the cache nothing is left;
 *   - the sequence does reach the rare states: out-of-memory, frees left pending because the
 *     block was recorded on a stream with work in flight, and pages of busy blocks moved by
 *     aliasing.
 * vram_allocator_check() verifies the internal invariants every few thousand operations. Both
 * memory models run. The length is bounded in operations and in seconds (shorter under the
 * sanitizers); VRAM_TEST_SEED=N runs another sequence than CTest's.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fakes/event_device.h"
#include "fakes/stream_hazards.h"
#include "test_rng.h"
#include "vram/alloc.h"

#define MiB (1024ull * 1024ull)
#define SLOTS 2048
#define NSTREAMS 4

typedef struct live {
    void *ptr;
    uint64_t size, requested;
    vram_stream stream;
    vram_tag tag;
    unsigned used_on; /* bit mask of streams recorded with record_stream */
} live;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { return test_rng(&rng_state); }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static live slots[SLOTS];
static stream_hazards hazards;
static uint64_t phys_violations, unmap_violations, aliases_seen;

static int by_ptr(const void *x, const void *y) {
    const live *a = x, *b = y;
    return (uintptr_t)a->ptr < (uintptr_t)b->ptr ? -1 : (uintptr_t)a->ptr > (uintptr_t)b->ptr;
}

/* The device is about to take pages away from [addr, addr+size) (page_unmap, page_drop): no
 * live block and no unfinished work may use any of it. */
static void on_unmap(void *ctx, uint64_t addr, uint64_t size) {
    vram_device *dev = ctx;
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].ptr && (uintptr_t)slots[i].ptr < addr + size && addr < (uintptr_t)slots[i].ptr + slots[i].size)
            unmap_violations++;
    unmap_violations += hazards_in_use(&hazards, dev, addr, size);
}

static int shadow_check(vram_allocator *a) {
    static live sorted[SLOTS];
    size_t n = 0;
    int64_t bytes[VRAM_POOL_COUNT] = {0}, req = 0, count = 0, tag_bytes[VRAM_TAG_MAX] = {0};
    int64_t tag_req[VRAM_TAG_MAX] = {0}, tag_count[VRAM_TAG_MAX] = {0};
    for (int i = 0; i < SLOTS; i++) {
        if (!slots[i].ptr) continue;
        sorted[n++] = slots[i];
        int pool = slots[i].size <= MiB ? VRAM_POOL_SMALL : VRAM_POOL_LARGE;
        bytes[pool] += (int64_t)slots[i].size;
        req += (int64_t)slots[i].requested;
        count++;
        tag_bytes[slots[i].tag] += (int64_t)slots[i].size;
        tag_req[slots[i].tag] += (int64_t)slots[i].requested;
        tag_count[slots[i].tag]++;
    }
    qsort(sorted, n, sizeof *sorted, by_ptr);
    int ok = 1;
    for (size_t i = 1; i < n; i++)
        if ((uintptr_t)sorted[i - 1].ptr + sorted[i - 1].size > (uintptr_t)sorted[i].ptr) ok = 0;
    CHECK(ok, "live blocks overlap");
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[VRAM_POOL_SMALL].current == bytes[VRAM_POOL_SMALL] &&
              st.allocated_bytes[VRAM_POOL_LARGE].current == bytes[VRAM_POOL_LARGE],
          "allocated bytes %lld/%lld, shadow %lld/%lld", (long long)st.allocated_bytes[1].current,
          (long long)st.allocated_bytes[2].current, (long long)bytes[1], (long long)bytes[2]);
    CHECK(st.allocation[0].current == count, "allocation count");
    CHECK(st.requested_bytes[0].current >= req, "requested bytes (pending frees still count)");
    for (int t = 0; t < VRAM_TAG_MAX; t++) /* a tag's figures count live blocks only: exact */
        CHECK(st.tags[t].allocated_bytes.current == tag_bytes[t] && st.tags[t].requested_bytes.current == tag_req[t] &&
                  st.tags[t].allocation.current == tag_count[t],
              "tag %d: %lld bytes, %lld requested, %lld blocks; shadow %lld, %lld, %lld", t,
              (long long)st.tags[t].allocated_bytes.current, (long long)st.tags[t].requested_bytes.current,
              (long long)st.tags[t].allocation.current, (long long)tag_bytes[t], (long long)tag_req[t],
              (long long)tag_count[t]);
    CHECK(st.reserved_bytes[0].current >= st.allocated_bytes[0].current, "reserved >= allocated");
    return ok;
}

/* One randomized sequence under configuration `conf`; with `reconfigure`, the options are also
 * changed at random at run time (otherwise the run keeps its configuration, caching aside). */
static void run(const char *conf, int reconfigure, uint64_t max_ops, double max_seconds) {
    vram_device *dev;
    CHECK_OK(event_device_open("8GiB", &dev));
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK_OK(vram_alloc_config_parse(conf, &cfg));
    vram_allocator *a;
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    evdev_state *ev = event_device_state(dev);
    ev->phys.on_unmap = on_unmap;
    ev->phys.ctx = dev;
    memset(slots, 0, sizeof slots);
    hazards_init(&hazards);
    phys_violations = unmap_violations = 0;
    uint64_t ops = 0, ooms = 0, mallocs = 0, hazard_violations = 0, check_failures = 0;
    uint64_t used_frees = 0, pending_seen = 0; /* frees of blocks used on other streams; samples with pending blocks */
    uint64_t caching_toggles = 0, reconfigs = 0;
    double start = now();
    for (; ops < max_ops; ops++) {
        if ((ops & 4095) == 0 && now() - start > max_seconds) break;
        if (ops && ops % 20000 == 0) { /* here, before the operations that `continue` */
            if (vram_allocator_check(a) != VRAM_OK) {
                check_failures++;
                CHECK(0, "invariant broken after %llu ops: %s", (unsigned long long)ops, vram_last_error());
            }
            shadow_check(a);
            hazards_prune(&hazards, dev);
        }
        uint64_t r = rnd() % 1000;
        int k = (int)(rnd() % SLOTS);
        /* one stream alone first (one-stream mode: pages move busy to blocks' edges), then all */
        unsigned s = ops < max_ops / 8 ? 0 : (unsigned)(rnd() % NSTREAMS);
        if (r < 560) {
            if (slots[k].ptr) continue;
            unsigned e = (unsigned)(rnd() % 27);
            uint64_t size = (rnd() % 8 == 0) ? 4096 : (1ull << e) + rnd() % (1ull << e);
            vram_tag tag = (vram_tag)(rnd() % VRAM_TAG_BUILTIN_COUNT);
            void *p = NULL;
            vram_status st = vram_allocator_malloc(a, size, s, tag, &p);
            mallocs++;
            if (st == VRAM_ERR_OUT_OF_MEMORY) {
                ooms++;
                CHECK(p == NULL, "no pointer on OOM");
                continue;
            }
            CHECK(st == VRAM_OK, "malloc: %s", vram_last_error());
            size_t bsize = 0, breq = 0;
            vram_tag btag = VRAM_TAG_MAX;
            CHECK_OK(vram_allocator_block_info(a, p, &bsize, &breq, &btag));
            CHECK(bsize >= size && bsize % 512 == 0 && breq == size && btag == tag,
                  "block of %zu bytes, %zu requested, tag %d for %llu bytes, tag %d", bsize, breq, (int)btag,
                  (unsigned long long)size, (int)tag);
            hazards_check_block(&hazards, dev, (uintptr_t)p, bsize, s, &hazard_violations, &phys_violations);
            slots[k] = (live){p, bsize, size, s, tag, 0};
        } else if (r < 900) {
            if (!slots[k].ptr) continue;
            /* the work queued so far may use the block: hazards first, and the slot emptied, as
             * the free may unmap its pages at once (caching:False) */
            live freed = slots[k];
            slots[k].ptr = NULL;
            hazards_add(&hazards, dev, (uintptr_t)freed.ptr, freed.size, (unsigned)freed.stream);
            for (unsigned u = 0; u < NSTREAMS; u++)
                if (freed.used_on & (1u << u)) hazards_add(&hazards, dev, (uintptr_t)freed.ptr, freed.size, u);
            CHECK_OK(vram_allocator_free(a, freed.ptr));
            if (freed.used_on && (++used_frees & 15) == 0) { /* sample: did frees stay pending? */
                vram_stats q;
                vram_allocator_get_stats(a, &q);
                if (q.active[0].current > q.allocation[0].current) pending_seen++;
            }
        } else if (r < 930) {
            if (!slots[k].ptr) continue;
            CHECK_OK(vram_allocator_record_stream(a, slots[k].ptr, s));
            if (s != slots[k].stream) slots[k].used_on |= 1u << s;
        } else if (r < 965) {
            event_device_submit(dev, s);
        } else if (r < 990) {
            event_device_complete(dev, s);
            hazards_prune(&hazards, dev);
        } else if (r < 992) {
            CHECK_OK(vram_allocator_empty_cache(a));
            hazards_prune(&hazards, dev); /* empty_cache waited for every stream */
        } else if (r < 993 && !(reconfigure && rnd() % 2)) { /* caching off (the cache emptied, as above) or back on, at run time */
            int on = !vram_allocator_config(a)->caching;
            CHECK_OK(vram_allocator_set_caching(a, on));
            CHECK(vram_allocator_config(a)->caching == on, "set_caching(%d) took", on);
            if (!on) hazards_prune(&hazards, dev);
            caching_toggles++;
        } else if (r < 993) { /* runs that reconfigure: the options PyTorch's settings change (set_config) */
            vram_alloc_config want;
            vram_allocator_get_config(a, &want);
            static const double gc[] = {0.0, 0.6, 0.9};
            static const uint64_t split[] = {UINT64_MAX, 20 * MiB, 64 * MiB, 256 * MiB};
            want.garbage_collection_threshold = gc[rnd() % 3];
            want.small_classes = (int)(rnd() % 2);
            want.max_split_size = split[rnd() % 4];
            want.max_non_split_rounding = (rnd() % 2) * 20 * MiB;
            want.roundup_power2_divisions = (uint32_t)(1u << (rnd() % 4)) & ~1u; /* 0, 2, 4, 8 */
            want.chunk_min = (rnd() % 3) * 2 * MiB; /* the default, one page or two: applies to the next maps */
            int expandable = want.expandable_segments;
            if (rnd() % 3 == 0) want.expandable_segments = !expandable; /* new memory by pages or segments */
            vram_status st = vram_allocator_set_config(a, &want);
            if (st == VRAM_ERR_INVALID_ARG && want.expandable_segments && !expandable) { /* started with segments */
                want.expandable_segments = expandable;
                st = vram_allocator_set_config(a, &want);
            }
            CHECK(st == VRAM_OK, "set_config: %s", vram_last_error());
            vram_alloc_config got;
            vram_allocator_get_config(a, &got);
            CHECK(got.garbage_collection_threshold == want.garbage_collection_threshold &&
                      got.small_classes == want.small_classes && got.max_split_size == want.max_split_size &&
                      got.roundup_power2_divisions == want.roundup_power2_divisions && got.chunk_min == want.chunk_min &&
                      got.expandable_segments == want.expandable_segments,
                  "set_config took");
            if (vram_allocator_check(a) != VRAM_OK) {
                check_failures++;
                CHECK(0, "invariant broken by set_config after %llu ops: %s", (unsigned long long)ops, vram_last_error());
            }
            reconfigs++;
        } else if (r < 998) {
            uint64_t limit = (rnd() % 3 == 0) ? 0 : (256 + rnd() % 7936) * MiB;
            CHECK_OK(vram_allocator_set_limit(a, limit));
        } else {
            vram_allocator_reset_peak_stats(a);
        }
    }
    CHECK(hazard_violations == 0, "%llu blocks handed to another stream before the freeing stream's work finished",
          (unsigned long long)hazard_violations);
    CHECK_OK(vram_allocator_check(a));
    shadow_check(a);
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].ptr) {
            live freed = slots[i];
            slots[i].ptr = NULL;
            hazards_add(&hazards, dev, (uintptr_t)freed.ptr, freed.size, (unsigned)freed.stream);
            CHECK_OK(vram_allocator_free(a, freed.ptr));
        }
    for (unsigned u = 0; u < NSTREAMS; u++) event_device_complete(dev, u);
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[0].current == 0 && st.active_bytes[0].current == 0 && st.requested_bytes[0].current == 0,
          "nothing allocated or active after freeing all");
    CHECK(st.reserved_bytes[0].current == 0 && st.segment[0].current == 0,
          "nothing reserved after freeing all and emptying the cache (%lld)", (long long)st.reserved_bytes[0].current);
    CHECK(ooms > 0, "the sequence exercised out-of-memory (%llu of %llu mallocs)", (unsigned long long)ooms,
          (unsigned long long)mallocs);
    CHECK(st.num_ooms == ooms, "num_ooms counts every out-of-memory answer: %llu, the test saw %llu",
          (unsigned long long)st.num_ooms, (unsigned long long)ooms);
    CHECK(pending_seen > 0, "frees left pending by record_stream on busy streams (%llu of %llu sampled)",
          (unsigned long long)pending_seen, (unsigned long long)used_frees / 16);
    CHECK(caching_toggles > 0, "caching was turned off or on at run time (%llu times)", (unsigned long long)caching_toggles);
    CHECK(!reconfigure || reconfigs > 0, "the options were changed at run time (%llu times)", (unsigned long long)reconfigs);
    CHECK_OK(vram_allocator_check(a));
    printf("%-40s %9llu ops in %.1f s: %llu mallocs, %llu OOMs, %llu syncs, %llu device maps, %llu aliases",
           conf[0] ? conf : "default", (unsigned long long)ops, now() - start, (unsigned long long)mallocs,
           (unsigned long long)ooms, (unsigned long long)st.num_sync_all_streams, (unsigned long long)st.num_device_alloc,
           (unsigned long long)ev->alias_calls);
    printf(reconfigure ? ", %llu reconfigurations\n" : "\n", (unsigned long long)reconfigs);
    aliases_seen += ev->alias_calls;
    vram_allocator_destroy(a);
    CHECK(ev->live_events == 0, "every event destroyed");
    CHECK(phys_violations == 0,
          "%llu times a new block lay on an unmapped page or on physical memory another stream's unfinished work uses",
          (unsigned long long)phys_violations);
    CHECK(unmap_violations == 0, "%llu times pages left an address a live block or unfinished work still used",
          (unsigned long long)unmap_violations);
    vram_device_close(dev);
    hazards_free(&hazards);
}

int main(void) {
    int sanitized = getenv("VRAM_TEST_SANITIZED") != NULL;
    const char *seed = getenv("VRAM_TEST_SEED"); /* another sequence, for longer hunts than CTest's */
    if (seed && *seed) {
        rng_state ^= strtoull(seed, NULL, 0) * 0xD1B54A32D192ED03ull; /* each seed its own state */
        if (!rng_state) rng_state = 1;                                 /* (xorshift needs a nonzero one) */
        printf("seed %s\n", seed);
    }
    uint64_t ops = sanitized ? 400000 : 6000000;
    double seconds = sanitized ? 20 : 25;
    run("", 0, ops, seconds);
    run("expandable_segments:False", 0, ops / 2, seconds / 2);
    run("expandable_segments:False,max_split_size_mb:64,roundup_power2_divisions:4", 0, ops / 4, seconds / 4);
    run("caching:False", 0, ops / 10, seconds / 4);
    run("move_busy_pages:True", 0, ops / 4, seconds / 4);
    run("chunk_size_mb:16,reserve_slack:0.02", 0, ops / 4, seconds / 4);
    run("chunk_size_mb:64,move_busy_pages:True", 0, ops / 4, seconds / 4); /* chunks shrink near the 8 GiB limit */
    run("chunk_size_mb:64,chunk_headroom:0", 0, ops / 8, seconds / 8);      /* 64 MiB chunks up to the limit */
    run("garbage_collection_threshold:0.6,chunk_size_mb:2,move_min_mb:2", 0, ops / 8, seconds / 8); /* frees coalesced at once */
    run("page_size_mb:4,chunk_size_mb:8,move_busy_pages:True", 0, ops / 8, seconds / 8); /* pages of two device pages */
    run("chunk_size_mb:64,chunk_min_mb:2,reserve_slack:0.01", 0, ops / 8, seconds / 8); /* one-page chunks, tight budget */
    run("", 1, ops / 4, seconds / 4);                          /* options changed at run time */
    run("expandable_segments:False", 1, ops / 8, seconds / 8); /* ... where max_split_size counts */
    CHECK(aliases_seen > 0, "busy pages moved by aliasing in some run (%llu page_alias calls)",
          (unsigned long long)aliases_seen);
    return check_done();
}

/* test_alloc_streams.c — the caching allocator with several streams and several threads, case
 * by case, with exact numbers: a block freed on one stream and who may reuse it when,
 * record_stream and pending frees (in the statistics, snapshots and empty_cache), busy pages moved
 * by aliasing and where they may land, the one-stream mode's merges and its end when a second
 * stream or a capture comes, and four threads on one allocator while caching and options change.
 * Most tests run on the event device (fakes/event_device.h), whose streams' work each test submits
 * and completes by hand; each opens its own allocator and closes it with the invariant checker,
 * and main runs them in order. One-stream cases are test_alloc.c's.
 */
#include <pthread.h>

#include "alloc_test_util.h"
#include "vram/snapshot.h"

/* A block of `size` freed on stream 1 while stream 1's work runs: stream 2 does not get it,
 * stream 1 does at once. Returns the block's address (freed again). */
static void *stream_reuse(vram_allocator *a, vram_device *dev, size_t size) {
    void *p, *q, *r;
    CHECK_OK(vram_allocator_malloc(a, size, 1, 0, &p));
    event_device_submit(dev, 1); /* a kernel on stream 1 uses p */
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_malloc(a, size, 2, 0, &q));
    CHECK(q != p, "%zu bytes: stream 2 does not get stream 1's block while its work runs", size);
    CHECK_OK(vram_allocator_malloc(a, size, 1, 0, &r));
    CHECK(r == p, "%zu bytes: stream 1 reuses its own block at once", size);
    CHECK_OK(vram_allocator_free(a, r));
    CHECK_OK(vram_allocator_free(a, q));
    return p;
}

/* A block freed on stream 1 is reused at once by stream 1, but by stream 2 only after stream
 * 1's work queued before the free has completed. */
static void test_streams(void) {
    vram_device *dev;
    CHECK_OK(event_device_open("1GiB", &dev));
    vram_allocator *a;
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    void *p = stream_reuse(a, dev, 4 * MiB);
    event_device_complete(dev, 1);
    void *s;
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 3, 0, &s)); /* records + polls, then reuses */
    void *t;
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 3, 0, &t));
    CHECK(s == p || t == p, "after stream 1's work completed another stream may take its block");
    CHECK_OK(vram_allocator_free(a, s));
    CHECK_OK(vram_allocator_free(a, t));
    CHECK_OK(vram_allocator_check(a));

    /* record_stream: the free waits for the other stream's work */
    void *u;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &u));
    CHECK_OK(vram_allocator_record_stream(a, u, 5));
    event_device_submit(dev, 5);
    CHECK_OK(vram_allocator_free(a, u));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.active[0].current == 1 && st.allocation[0].current == 0, "pending free stays active");
    /* its requested bytes stay in the pool's count until the free completes (as PyTorch counts
     * them), not in its tag's, which counts live blocks: also while every block has one tag */
    CHECK(st.requested_bytes[0].current == (int64_t)MiB && st.tags[0].requested_bytes.current == 0 &&
              st.tags[0].allocated_bytes.current == 0,
          "pending: pool requested %lld, tag requested %lld", (long long)st.requested_bytes[0].current,
          (long long)st.tags[0].requested_bytes.current);
    CHECK_OK(vram_allocator_check(a));
    vram_snapshot *snap;
    CHECK_OK(vram_allocator_snapshot(a, &snap));
    int pending = 0;
    for (size_t i = 0; i < snap->num_blocks; i++) pending += snap->blocks[i].state == VRAM_BLOCK_ACTIVE_PENDING_FREE;
    CHECK(pending == 1, "snapshot shows the pending free");
    vram_snapshot_free(snap);
    void *v;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &v));
    CHECK(v != u, "not reused while stream 5 still works");
    event_device_complete(dev, 5);
    CHECK_OK(vram_allocator_free(a, v));
    /* the fast path asks events only every so many mallocs (each query costs microseconds
     * while a GPU is busy): the pending free completes within a bounded number of them */
    int mallocs = 0;
    do {
        void *w;
        CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &w));
        vram_allocator_get_stats(a, &st);
        CHECK_OK(vram_allocator_free(a, w));
    } while (st.active[0].current != 1 && ++mallocs < 1000);
    CHECK(st.active[0].current == 1 && mallocs <= 64, "pending free completed within 64 mallocs");
    void *z;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &z));
    CHECK_OK(vram_allocator_record_stream(a, z, 6));
    event_device_submit(dev, 6); /* stream 6 still works on z when it is freed */
    CHECK_OK(vram_allocator_free(a, z));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.active[0].current == 0, "empty_cache waited for the pending free's stream");
    CHECK(st.reserved_bytes[0].current == 0, "empty_cache waits for streams and releases everything");
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    CHECK(event_device_state(dev)->live_events == 0, "every event destroyed");
    vram_device_close(dev);
}

/* Pages that stream 1 freed and its kernels may still use: a request that needs them moved first
 * asks the streams, and pages whose work has finished are unmapped and mapped plainly; only pages
 * still in use are aliased. x (8 MiB, one chunk), y and w freed around y on stream 1; 13 MiB then
 * goes after y, over w's 4 mapped MiB, and needs 10 MiB more: x's chunk moves there. */
static void test_busy_pages_ask_first(void) {
    for (int done = 0; done < 2; done++) {
        vram_device *dev;
        vram_allocator *a = open_alloc("events:1GiB", "chunk_size_mb:8,reserve_slack:0,move_min_mb:2,move_busy_pages:True", &dev);
        CHECK(a != NULL, "allocator");
        if (!a) return;
        void *x, *y, *w, *r;
        CHECK_OK(vram_allocator_malloc(a, 8 * MiB, 1, 0, &x));
        CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 1, 0, &y));
        CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 1, 0, &w));
        event_device_submit(dev, 1); /* kernels on stream 1 use x and w */
        CHECK_OK(vram_allocator_free(a, x));
        CHECK_OK(vram_allocator_free(a, w));
        if (done) event_device_complete(dev, 1);
        CHECK_OK(vram_allocator_malloc(a, 13 * MiB, 1, 0, &r));
        CHECK((char *)r == (char *)y + 2 * MiB, "13 MiB goes to the free end");
        const evdev_state *e = event_device_state(dev);
        if (done)
            CHECK(e->unmap_calls == 1 && e->alias_calls == 0, "finished work: x's chunk unmapped, not aliased (%llu, %llu)",
                  (unsigned long long)e->unmap_calls, (unsigned long long)e->alias_calls);
        else
            CHECK(e->alias_calls == 1 && e->unmap_calls == 0, "work still running: x's chunk aliased (%llu, %llu)",
                  (unsigned long long)e->alias_calls, (unsigned long long)e->unmap_calls);
        vram_stats st;
        vram_allocator_get_stats(a, &st);
        CHECK(st.reserved_bytes[0].current == (int64_t)(16 * MiB), "x's 8 MiB moved: 16 MiB reserved, got %lld",
              (long long)st.reserved_bytes[0].current);
        CHECK_OK(vram_allocator_check(a));
        CHECK_OK(vram_allocator_free(a, r));
        CHECK_OK(vram_allocator_free(a, y));
        event_device_complete(dev, 1);
        close_alloc(a, dev);
    }
}

/* A busy page (freed on stream 1, its work still running) moved to the edge of a new block
 * would leave the rest of the page free for any stream while stream 1 may still write it. With
 * several streams, only pages wholly inside the block take busy pages; with one stream alone the
 * edge may take one, and the second stream, when it comes, first waits for that work. The
 * device's physical model (fakes/phys_pages.h) tells which memory lies where. */
static void test_busy_pages_edges(void) {
    for (int many = 0; many < 2; many++) {
        vram_device *dev;
        vram_allocator *a =
            open_alloc("events:1GiB", "chunk_size_mb:2,move_min_mb:2,reserve_slack:0,move_busy_pages:True", &dev);
        CHECK(a != NULL, "allocator");
        if (!a) return;
        evdev_state *e = event_device_state(dev);
        void *x, *l, *b, *c, *s2 = NULL;
        if (many) /* stream 2 has allocated (from the small pool): no more one-stream mode */
            CHECK_OK(vram_allocator_malloc(a, 4 * KiB, 2, 0, &s2));
        CHECK_OK(vram_allocator_malloc(a, 6 * MiB, 1, 0, &x));         /* pages 0-2 */
        CHECK_OK(vram_allocator_malloc(a, 2 * MiB + 512, 1, 0, &l));   /* page 3, the start of 4 */
        uint64_t xp[3];
        for (int i = 0; i < 3; i++) xp[i] = phys_pages_id(&e->phys, (uintptr_t)x + (uint64_t)i * 2 * MiB);
        event_device_submit(dev, 1); /* a kernel on stream 1 writes x */
        uint64_t target = e->submitted[1];
        CHECK_OK(vram_allocator_free(a, x));
        /* 6 MiB + 512 B, too large for x's hole, after l: the rest of page 4, pages 5 and 6 whole
         * and the start of page 7, whose last ~2 MiB stay free. Mapping 3 pages would pass the
         * budget (the peak, 10 MiB), so x's 3 busy pages move. */
        CHECK_OK(vram_allocator_malloc(a, 6 * MiB + 512, 1, 0, &b));
        CHECK((char *)b == (char *)l + 2 * MiB + 512, "the block goes after l");
        CHECK(e->alias_calls > 0, "x's busy pages moved by aliasing (%llu calls)", (unsigned long long)e->alias_calls);
        uint64_t edge = phys_pages_id(&e->phys, (uintptr_t)b + 6 * MiB);
        int edge_busy = 0;
        for (int i = 0; i < 3; i++) edge_busy |= edge == xp[i];
        if (many)
            CHECK(!edge_busy, "several streams: the edge page took no page stream 1 may still write");
        else
            CHECK(edge_busy, "one stream: the edge page took one of x's pages");
        /* stream 2 asks for what is left of the edge page */
        CHECK_OK(vram_allocator_malloc(a, 1536 * KiB, 2, 0, &c));
        uint64_t cp = phys_pages_id(&e->phys, (uintptr_t)c);
        int on_busy = 0;
        for (int i = 0; i < 3; i++) on_busy |= cp == xp[i];
        CHECK(!on_busy || e->completed[1] >= target,
              "stream 2 got memory stream 1's kernel may still write (%s)", many ? "several streams" : "one stream");
        event_device_complete(dev, 1);
        CHECK_OK(vram_allocator_free(a, c));
        CHECK_OK(vram_allocator_free(a, b));
        CHECK_OK(vram_allocator_free(a, l));
        if (s2) CHECK_OK(vram_allocator_free(a, s2));
        event_device_complete(dev, 2);
        close_alloc(a, dev);
    }
}

/* Active is allocated plus pending frees: its peak, total and resets with blocks pending, as
 * PyTorch counts them (the allocator derives active from allocation and the pending blocks). */
static void test_active_with_pending(void) {
    vram_device *dev;
    CHECK_OK(event_device_open("1GiB", &dev));
    vram_allocator *a;
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    void *u, *v, *w;
    vram_stats st;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &u));
    CHECK_OK(vram_allocator_record_stream(a, u, 5));
    event_device_submit(dev, 5);
    CHECK_OK(vram_allocator_free(a, u)); /* pending: stream 5 still works */
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &v));
    vram_allocator_get_stats(a, &st);
    for (int p = VRAM_POOL_ALL; p <= VRAM_POOL_SMALL; p++) {
        CHECK(stat_is(&st.active[p], 2, 2, 2, 0), "pool %d: active counts the pending block, peak 2", p);
        CHECK(stat_is(&st.allocation[p], 1, 1, 2, 1), "pool %d: allocation peak 1", p);
        CHECK(stat_is(&st.active_bytes[p], 2 * MiB, 2 * MiB, 2 * MiB, 0), "pool %d: active bytes peak 2 MiB", p);
    }
    CHECK(st.active[VRAM_POOL_LARGE].peak == 0, "nothing active in the large pool");
    vram_allocator_reset_peak_stats(a);
    vram_allocator_reset_accumulated_stats(a);
    vram_allocator_get_stats(a, &st);
    CHECK(stat_is(&st.active[0], 2, 2, 0, 0) && stat_is(&st.allocation[0], 1, 1, 0, 0),
          "resets with a pending block: active peak 2, allocation peak 1");
    CHECK_OK(vram_allocator_free(a, v));
    event_device_complete(dev, 5);
    CHECK_OK(vram_allocator_empty_cache(a)); /* completes the pending free (malloc polls only now and then) */
    CHECK_OK(vram_allocator_malloc(a, 512, 1, 0, &w));
    vram_allocator_get_stats(a, &st);
    CHECK(stat_is(&st.active[0], 1, 2, 1, 2), "active after the pending free completed: peak still 2");
    CHECK(stat_is(&st.active_bytes[0], 512, 2 * MiB, 512, 2 * MiB), "active bytes likewise");
    CHECK(stat_is(&st.allocation[0], 1, 1, 1, 1), "allocation unchanged by the pending free");
    CHECK_OK(vram_allocator_free(a, w));
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* One stream: a block it frees merges with ready free memory beside it (ready after a wait for
 * the stream, or never used), so the two serve a request neither fits alone; the merged block
 * is the stream's, not ready. A second stream ends this mode: the first stream's blocks are
 * made ready then (one wait for its work), so the second may use them; a capture does the same
 * before it starts. (That such merges stop once pages had to move is checked on whole traces:
 * tests/replay_bounds.py.) */
static vram_allocator *one_stream_setup(vram_device *dev, void **w0, void **x, void **y, void **z) {
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    vram_allocator *a;
    if (vram_alloc_config_parse("reserve_slack:0.99", &cfg) != VRAM_OK || /* no page moves */
        vram_allocator_new(dev, &cfg, &a) != VRAM_OK)
        return NULL;
    size_t h = 3 * MiB / 2;
    CHECK_OK(vram_allocator_malloc(a, h, 0, 0, w0));      /* [0, 1.5) MiB */
    CHECK_OK(vram_allocator_malloc(a, h, 0, 0, x));       /* [1.5, 3): on pages shared with w0 and y */
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, y)); /* [3, 6) */
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, z)); /* [6, 8): y is not next to the free end */
    CHECK_OK(vram_allocator_free(a, *x));
    CHECK_OK(vram_allocator_empty_cache(a)); /* waits for stream 0: x is ready, no page unmapped */
    return a;
}

static void test_one_stream_merges(void) {
    vram_device *dev;
    CHECK_OK(event_device_open("1GiB", &dev));
    evdev_state *e = event_device_state(dev);
    void *w0, *x, *y, *z, *w, *v, *u;
    vram_allocator *a = one_stream_setup(dev, &w0, &x, &y, &z);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    CHECK_OK(vram_allocator_free(a, y)); /* not ready, next to x */
    CHECK_OK(vram_allocator_malloc(a, 9 * MiB / 2, 0, 0, &w));
    CHECK(w == x, "x and y, freed by the only stream, serve 4.5 MiB together (got %+lld KiB from x)",
          (long long)(((char *)w - (char *)x) / 1024));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 8 * MiB, "reserved %lld MiB, expected 8",
          (long long)(st.reserved_bytes[0].current / MiB));
    CHECK_OK(vram_allocator_check(a));

    /* stream 0 still works on w when it is freed; then stream 1 asks */
    event_device_submit(dev, 0);
    CHECK_OK(vram_allocator_free(a, w));
    uint64_t syncs = e->syncs;
    CHECK_OK(vram_allocator_malloc(a, 9 * MiB / 2, 1, 0, &v));
    CHECK(e->syncs == syncs + 1, "a second stream waits once for the first one's work (%llu waits)",
          (unsigned long long)(e->syncs - syncs));
    CHECK(v == w, "after the wait the second stream reuses the first one's memory");
    CHECK(e->completed[0] == e->submitted[0], "the wait covered stream 0's work");
    CHECK_OK(vram_allocator_free(a, v));
    event_device_submit(dev, 1);
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 2, 0, &v));
    CHECK(e->syncs == syncs + 1, "no more waits once several streams were seen");
    CHECK(v != w, "stream 2 does not get stream 1's block while its work runs");
    CHECK_OK(vram_allocator_free(a, v));
    CHECK_OK(vram_allocator_free(a, z));
    CHECK_OK(vram_allocator_free(a, w0));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);

    /* a capture after one-stream merges: begin_pool makes them ready before the capture starts */
    CHECK_OK(event_device_open("1GiB", &dev));
    e = event_device_state(dev);
    a = one_stream_setup(dev, &w0, &x, &y, &z);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    event_device_submit(dev, 0);
    CHECK_OK(vram_allocator_free(a, y));
    CHECK_OK(vram_allocator_malloc(a, 13 * MiB / 4, 0, 0, &u)); /* from x and y merged: leaves [4.75, 6) */
    CHECK(u == x, "stream 0 takes x and y together (got %+lld KiB from x)", (long long)(((char *)u - (char *)x) / 1024));
    syncs = e->syncs;
    CHECK_OK(vram_allocator_begin_pool(a, 7));
    CHECK(e->syncs == syncs + 1 && e->completed[0] == e->submitted[0], "begin_pool waited for stream 0");
    e->capturing = 1;
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB / 4, 3, 0, &w));
    CHECK(w == (char *)x + 13 * MiB / 4, "the capture's stream takes the rest of the merged block (got %+lld KiB from x)",
          (long long)(((char *)w - (char *)x) / 1024));
    CHECK(e->capture_violations == 0, "no event call during the capture (%llu)", (unsigned long long)e->capture_violations);
    e->capturing = 0;
    CHECK_OK(vram_allocator_end_pool(a, 7));
    CHECK_OK(vram_allocator_free(a, w));
    CHECK_OK(vram_allocator_release_pool(a, 7));
    CHECK_OK(vram_allocator_free(a, u));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

typedef struct thread_arg {
    vram_allocator *a;
    unsigned seed;
    int failures;
} thread_arg;

static void *hammer(void *arg) {
    thread_arg *t = arg;
    void *slots[64] = {0};
    unsigned x = t->seed;
    for (int i = 0; i < 50000; i++) {
        x = x * 1103515245u + 12345u;
        int k = (int)(x >> 16) % 64;
        if (t->seed == 1 && i % 5000 == 2500) { /* caching switched while the others allocate */
            vram_alloc_config c;
            vram_allocator_get_config(t->a, &c);
            if (vram_allocator_set_caching(t->a, !c.caching) != VRAM_OK) t->failures++;
        }
        if (t->seed == 2 && i % 5000 == 1000) { /* and the options PyTorch's settings change */
            vram_alloc_config c;
            vram_allocator_get_config(t->a, &c);
            c.garbage_collection_threshold = c.garbage_collection_threshold > 0 ? 0.0 : 0.8;
            c.roundup_power2_divisions = c.roundup_power2_divisions ? 0 : 4;
            c.small_classes = !c.small_classes;
            if (vram_allocator_set_config(t->a, &c) != VRAM_OK) t->failures++;
        }
        if (slots[k]) {
            if (vram_allocator_free(t->a, slots[k]) != VRAM_OK) t->failures++;
            slots[k] = NULL;
        } else if (vram_allocator_malloc(t->a, 512u << ((x >> 8) % 14), (vram_stream)t->seed, 0, &slots[k]) != VRAM_OK) {
            t->failures++;
        }
    }
    for (int k = 0; k < 64; k++)
        if (slots[k] && vram_allocator_free(t->a, slots[k]) != VRAM_OK) t->failures++;
    return NULL;
}

static void test_threads(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:64GiB", "", &dev);
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){a, (unsigned)i + 1, 0};
        pthread_create(&th[i], NULL, hammer, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].failures == 0, "thread %d failures %d", i, args[i].failures);
    }
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocation[0].current == 0 && st.allocated_bytes[0].current == 0, "all freed");
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

int main(void) {
    test_streams();
    test_busy_pages_ask_first();
    test_busy_pages_edges();
    test_active_with_pending();
    test_one_stream_merges();
    test_threads();
    return check_done();
}

/* test_step_plan.c — learned placement (vram/step_plan.h): the offline solver and the layer.
 *
 * Solver: random cyclic lifetimes; no two conflicting requests may overlap (checked pair by
 * pair, independently of the solver's own conflict test), the arena is the highest end, and it
 * is at least the cyclic peak of live bytes (no placement can be smaller); bad input refused.
 * Layer: programs generated as a step of random large and small requests with random lifetimes
 * (some ending in the next step, some never), repeated, on the simulated device, with a shadow
 * of what is live: no two live blocks overlap, whoever served them (the plan's arena or the
 * allocator); the allocator's own invariants hold (vram_allocator_check); its allocated bytes
 * are the shadow's blocks outside arenas plus the arena; the layer's counters add up (served +
 * missed <= requests, arena_live_bytes = the shadow's bytes in the arena). A regular program
 * is served from a plan in its later steps; one that deviates (a request of another size, one
 * left out, another stream) misses there and stays correct, one that stops repeating has its
 * plan retired and its arena given back, and a program that repeats again is planned again.
 * Early plans: a program whose first step keeps state for good is served from its second.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "test_rng.h"
#include "vram/alloc.h"
#include "vram/backend.h"
#include "vram/step_plan.h"

#define MiB (1024ull * 1024ull)

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { return test_rng(&rng_state); }

/* ---- the solver ---- */

static uint64_t cyc_meets(uint64_t s, uint64_t e, uint64_t s2, uint64_t e2, uint64_t T) {
    for (int a = -1; a <= 1; a++) { /* shift the second by -T, 0, +T */
        uint64_t x0 = s2 + T + (uint64_t)(a * (int64_t)T), x1 = e2 + T + (uint64_t)(a * (int64_t)T);
        if (s + T < x1 && x0 < e + T) return 1;
    }
    return 0;
}

static void test_solver(void) {
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + rnd() % 120;
        uint64_t T = 10 + rnd() % 1000;
        uint64_t sz[120], s[120], e[120], off[120], arena = 0;
        for (size_t i = 0; i < n; i++) {
            sz[i] = 512 * (1 + rnd() % 64);
            s[i] = rnd() % T;
            e[i] = s[i] + 1 + rnd() % T; /* up to a whole period: some wrap */
        }
        vram_status st = vram_step_plan_solve(n, sz, s, e, T, off, &arena);
        CHECK(st == VRAM_OK, "round %d: %s", round, vram_last_error());
        if (st != VRAM_OK) continue;
        uint64_t top = 0, bad = 0;
        for (size_t i = 0; i < n; i++) {
            if (off[i] + sz[i] > top) top = off[i] + sz[i];
            for (size_t j = i + 1; j < n; j++)
                if (cyc_meets(s[i], e[i], s[j], e[j], T) && off[i] < off[j] + sz[j] && off[j] < off[i] + sz[i]) bad++;
        }
        CHECK(bad == 0, "round %d: %llu conflicting pairs overlap", round, (unsigned long long)bad);
        CHECK(arena == top, "round %d: arena %llu, highest end %llu", round, (unsigned long long)arena,
              (unsigned long long)top);
        uint64_t floor = 0; /* the cyclic peak of live bytes, at every start */
        for (size_t i = 0; i < n; i++) {
            uint64_t live = 0;
            for (size_t j = 0; j < n; j++)
                if ((s[j] <= s[i] && s[i] < e[j]) || s[i] + T < e[j]) live += sz[j];
            if (live > floor) floor = live;
        }
        CHECK(arena >= floor, "round %d: arena %llu below the live peak %llu", round, (unsigned long long)arena,
              (unsigned long long)floor);
    }
    /* disjoint lifetimes share memory: the arena is the largest request */
    uint64_t sz[3] = {4096, 1024, 2048}, s[3] = {0, 10, 20}, e[3] = {10, 20, 30}, off[3], arena;
    CHECK_OK(vram_step_plan_solve(3, sz, s, e, 40, off, &arena));
    CHECK(arena == 4096 && off[0] == 0 && off[1] == 0 && off[2] == 0, "arena %llu", (unsigned long long)arena);
    /* a lifetime that wraps conflicts with the start of the period */
    uint64_t e2[3] = {10, 20, 45};
    CHECK_OK(vram_step_plan_solve(3, sz, s, e2, 40, off, &arena));
    CHECK(arena == 4096 + 2048 && off[2] == 4096, "wrap: arena %llu, off %llu", (unsigned long long)arena,
          (unsigned long long)off[2]);
    uint64_t bad_e[1] = {5}, bad_s[1] = {5};
    CHECK(vram_step_plan_solve(1, sz, bad_s, bad_e, 40, off, &arena) == VRAM_ERR_INVALID_ARG, "empty lifetime");
    uint64_t long_e[1] = {50};
    CHECK(vram_step_plan_solve(1, sz, bad_s, long_e, 40, off, &arena) == VRAM_ERR_INVALID_ARG, "longer than T");
    CHECK(vram_step_plan_solve(1, sz, bad_s, long_e, 40, NULL, &arena) == VRAM_ERR_INVALID_ARG, "null offsets");
}

/* ---- the layer ---- */

typedef struct {
    uint64_t size;
    uint32_t life; /* requests of the step it lives for; 0: for good */
    int stream;
} op;

typedef struct {
    void *ptr;
    uint64_t size, rsize;
    uint64_t free_at; /* the program's request count at which it is freed */
} blk;

typedef struct {
    vram_device *dev;
    vram_allocator *a;
    vram_step_plan *p;
    blk *live;
    size_t nlive, cap;
    uint64_t count; /* requests made */
    uint64_t overlaps, failures, arena_mismatch;
} prog;

static int overlap_any(prog *g, uint64_t a, uint64_t size) {
    for (size_t i = 0; i < g->nlive; i++) {
        uint64_t b = (uint64_t)(uintptr_t)g->live[i].ptr;
        if (a < b + g->live[i].rsize && b < a + size) return 1;
    }
    return 0;
}

static void free_due(prog *g, int all) {
    for (size_t i = 0; i < g->nlive;) {
        if (all || (g->live[i].free_at && g->live[i].free_at <= g->count)) {
            if (vram_step_plan_free(g->p, g->live[i].ptr) != VRAM_OK) g->failures++;
            g->live[i] = g->live[--g->nlive];
        } else {
            i++;
        }
    }
}

static void request(prog *g, const op *o) {
    free_due(g, 0);
    void *ptr = NULL;
    if (vram_step_plan_malloc(g->p, o->size, (vram_stream)o->stream, VRAM_TAG_OTHER, &ptr) != VRAM_OK || !ptr) {
        g->failures++;
        return;
    }
    uint64_t rsize = (o->size + 511) & ~511ull;
    if (overlap_any(g, (uint64_t)(uintptr_t)ptr, rsize)) g->overlaps++;
    if (g->nlive == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 256;
        g->live = realloc(g->live, g->cap * sizeof *g->live);
    }
    g->count++;
    g->live[g->nlive++] = (blk){ptr, o->size, rsize, o->life ? g->count + o->life : 0};
}

/* The shadow against the allocator and the layer's counters. */
static void audit(prog *g, const char *what) {
    CHECK(vram_allocator_check(g->a) == VRAM_OK, "%s: allocator invariants: %s", what, vram_last_error());
    vram_step_plan_stats ps;
    vram_step_plan_get_stats(g->p, &ps);
    CHECK(ps.served + ps.missed <= ps.requests, "%s: served %llu + missed %llu > requests %llu", what,
          (unsigned long long)ps.served, (unsigned long long)ps.missed, (unsigned long long)ps.requests);
    /* bytes of live blocks the allocator itself holds (by block_info) and those it does not (the arena's) */
    uint64_t outside = 0, inside = 0;
    for (size_t i = 0; i < g->nlive; i++) {
        size_t bs, req;
        if (vram_step_plan_owns(g->p, g->live[i].ptr)) inside += g->live[i].rsize;
        else if (vram_allocator_block_info(g->a, g->live[i].ptr, &bs, &req, NULL) == VRAM_OK) outside += bs;
        else g->failures++; /* neither knows it */
    }
    CHECK(inside == ps.arena_live_bytes, "%s: arena live %llu, shadow %llu", what,
          (unsigned long long)ps.arena_live_bytes, (unsigned long long)inside);
    vram_stats st;
    vram_allocator_get_stats(g->a, &st);
    uint64_t alloc = (uint64_t)st.allocated_bytes[VRAM_POOL_ALL].current;
    CHECK(alloc == outside + ps.arena_bytes, "%s: allocated %llu, blocks outside the arena %llu, arena %llu", what,
          (unsigned long long)alloc, (unsigned long long)outside, (unsigned long long)ps.arena_bytes);
    CHECK(inside <= ps.arena_bytes, "%s: %llu bytes live in an arena of %llu", what, (unsigned long long)inside,
          (unsigned long long)ps.arena_bytes);
}

/* may_raise: begin plans wherever (on the sim device, whose pages move for free, reserved memory
 * follows allocated memory and an arena never fits under the peak so far). */
static void prog_open_cfg(prog *g, const vram_step_plan_config *cfg) {
    memset(g, 0, sizeof *g);
    CHECK_OK(vram_device_open("sim:64GiB", &g->dev));
    CHECK_OK(vram_allocator_new(g->dev, NULL, &g->a));
    CHECK_OK(vram_step_plan_new(g->a, cfg, &g->p));
}

static void prog_open(prog *g, int may_raise) {
    vram_step_plan_config cfg = {0};
    cfg.may_raise_peak = may_raise;
    prog_open_cfg(g, &cfg);
}

static void prog_close(prog *g, const char *what) {
    free_due(g, 1);
    CHECK(g->overlaps == 0, "%s: %llu live blocks overlapped", what, (unsigned long long)g->overlaps);
    CHECK(g->failures == 0, "%s: %llu calls failed", what, (unsigned long long)g->failures);
    vram_step_plan_stats ps;
    vram_step_plan_get_stats(g->p, &ps);
    CHECK(ps.arena_live_bytes == 0, "%s: arena bytes live after all freed", what);
    vram_step_plan_destroy(g->p);
    CHECK_OK(vram_allocator_check(g->a));
    vram_stats st;
    vram_allocator_get_stats(g->a, &st);
    CHECK(st.allocated_bytes[VRAM_POOL_ALL].current == 0, "%s: %lld bytes allocated after all freed", what,
          (long long)st.allocated_bytes[VRAM_POOL_ALL].current);
    vram_allocator_destroy(g->a);
    vram_device_close(g->dev);
    free(g->live);
}

/* A step of n random requests: mostly large, some small; lifetimes within the step, some into
 * the next one, a few for good. */
static void make_step(op *step, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int small = rnd() % 4 == 0;
        step[i].size = small ? 512 + rnd() % (256 * 1024) : 2 * MiB + (rnd() % 64) * MiB + rnd() % 4096;
        uint64_t r = rnd() % 100;
        step[i].life = r < 2 ? 0 : r < 15 ? (uint32_t)(n / 2 + rnd() % n) : (uint32_t)(1 + rnd() % (n / 2));
        step[i].stream = 0;
    }
}

static void test_regular(void) {
    for (int round = 0; round < 12; round++) {
        prog g;
        prog_open(&g, 1);
        size_t n = 80 + rnd() % 300;
        op *step = calloc(n, sizeof *step);
        make_step(step, n);
        for (int s = 0; s < 10; s++) {
            for (size_t i = 0; i < n; i++) request(&g, &step[i]);
            if (s % 3 == 2) audit(&g, "regular");
        }
        vram_step_plan_stats ps;
        vram_step_plan_get_stats(g.p, &ps);
        CHECK(ps.plans_built >= 1, "round %d: a program of 10 equal steps got no plan", round);
        CHECK(ps.served > ps.requests / 4, "round %d: %llu of %llu requests served", round,
              (unsigned long long)ps.served, (unsigned long long)ps.requests);
        CHECK(ps.last_arena_bytes >= ps.last_live_peak_bytes, "round %d: arena %llu below its floor %llu", round,
              (unsigned long long)ps.last_arena_bytes, (unsigned long long)ps.last_live_peak_bytes);
        prog_close(&g, "regular");
        free(step);
    }
}

static void test_deviations(void) {
    for (int round = 0; round < 12; round++) {
        prog g;
        prog_open(&g, 1);
        size_t n = 100 + rnd() % 200;
        op *step = calloc(n, sizeof *step), *other = calloc(n, sizeof *other);
        make_step(step, n);
        make_step(other, n);
        for (int s = 0; s < 24; s++) {
            for (size_t i = 0; i < n; i++) {
                op o = step[i];
                if (s >= 6 && s < 9 && rnd() % 8 == 0) o.size += 512 * (1 + rnd() % 8); /* another size */
                if (s >= 6 && s < 9 && rnd() % 16 == 0) continue;                       /* one left out */
                if (s >= 6 && s < 9 && rnd() % 32 == 0) o.stream = 1;                   /* another stream */
                request(&g, s >= 10 && s < 14 ? &other[i] : &o); /* then another program for a while */
            }
            audit(&g, "deviations");
            if (s == 14) {
                CHECK_OK(vram_step_plan_empty_cache(g.p));
                audit(&g, "after empty_cache");
            }
        }
        vram_step_plan_stats ps;
        vram_step_plan_get_stats(g.p, &ps);
        CHECK(ps.missed > 0, "round %d: deviations did not miss", round);
        CHECK(ps.plans_retired >= 1, "round %d: a program that changed kept its plan", round);
        CHECK(ps.plans_built >= 2, "round %d: the program, regular again, was not planned again (%llu)", round,
              (unsigned long long)ps.plans_built);
        prog_close(&g, "deviations");
        free(step);
        free(other);
    }
}

/* Early plans (cfg.early): a training program whose first step ends by allocating state for
 * good (the optimizer's, a pair of blocks per parameter) that the later steps do not allocate;
 * its steps begin holding little (a step's boundary is where a plan may begin).
 * The plan begins in the second step and serves it, skipping the state's entries; without
 * `early` nothing is served before the fourth step. Random steps, audited as above. */
static void test_early(void) {
    for (int round = 0; round < 12; round++) {
        for (int early = 0; early < 2; early++) {
            uint64_t seed = rng_state;
            prog g;
            vram_step_plan_config cfg = {0};
            cfg.early = early;
            prog_open_cfg(&g, &cfg);
            size_t n = 160 + rnd() % 200, np = 8 + rnd() % 16;
            op *step = calloc(n, sizeof *step), *param = calloc(np, sizeof *param);
            make_step(step, n);
            for (size_t i = 0; i < n; i++) step[i].life = 1 + (uint32_t)(rnd() % (n - i)); /* within the step */
            for (size_t i = 0; i < 64; i++) step[i] = (op){2 * MiB + rnd() % 4096, 1 + (uint32_t)(rnd() % 4), 0}; /* a step begins holding little */
            for (size_t i = 0; i < np; i++) param[i] = (op){8 * MiB + (rnd() % 16) * MiB, 0, 0};
            for (size_t i = 0; i < np; i++) request(&g, &param[i]);
            uint64_t served[10];
            for (int s = 0; s < 10; s++) {
                for (size_t i = 0; i < n; i++) request(&g, &step[i]);
                for (size_t i = 0; s == 0 && i < 2 * np; i++) request(&g, &param[i / 2]);
                audit(&g, "early");
                vram_step_plan_stats ps;
                vram_step_plan_get_stats(g.p, &ps);
                served[s] = ps.served;
            }
            if (early) {
                CHECK(served[0] == 0 && served[1] > 0, "round %d: early plan served %llu in the first step, %llu by the second's end",
                      round, (unsigned long long)served[0], (unsigned long long)served[1]);
                CHECK(served[9] - served[2] > 7 * n / 2, "round %d: early plan served %llu of %zu requests in the last 7 steps",
                      round, (unsigned long long)(served[9] - served[2]), 7 * n);
            } else {
                CHECK(served[2] == 0, "round %d: without early, %llu served by the third step's end", round,
                      (unsigned long long)served[2]);
            }
            prog_close(&g, "early");
            free(step);
            free(param);
            if (!early) rng_state = seed; /* the same program with early */
        }
    }
}

/* Auto plans (cfg.auto_plan) on generation's calls: a prefill of `layers` equal layers whose sizes
 * follow the call's prompt (scale), then a decode of random requests. `vary`: every other request
 * of the layers after the first three is of another size (the plan learnt from layers 0-1 serves
 * layer 2, then almost nothing). */
static void gen_call(prog *g, const op *layer, size_t lp, double scale, int vary) {
    for (int l = 0; l < 8; l++)
        for (size_t i = 0; i < lp; i++) {
            op o = layer[i];
            o.size = (uint64_t)((double)o.size * scale);
            if (vary && l >= 3 && i % 2) o.size += 4096 * (uint64_t)l;
            request(g, &o);
        }
    for (int t = 0; t < 40; t++) {
        op o = {2 * MiB + rnd() % (8 * MiB), 1 + (uint32_t)(rnd() % 20), 0};
        request(g, &o);
    }
    free_due(g, 1); /* the call ends: everything it made is freed */
}

/* A layer plan begins only from the second call with the layer at another shape, never in the
 * first (a single prefill gets none); the same calls with layers that change after the first three
 * get one plan that serves little, and then no more (the share rule); a training program on the
 * sim device, where best fit holds its reserved peak within 1/32 of its allocated peak, gets no
 * plan of a whole step. Audited as above. */
static void test_auto(void) {
    for (int round = 0; round < 8; round++) {
        for (int vary = 0; vary < 2; vary++) {
            uint64_t seed = rng_state;
            prog g;
            vram_step_plan_config cfg = {0};
            cfg.auto_plan = 1;
            prog_open_cfg(&g, &cfg);
            size_t lp = 16 + rnd() % 30;
            op *layer = calloc(lp, sizeof *layer);
            for (size_t i = 0; i < lp; i++)
                layer[i] = (op){2 * MiB + (rnd() % 32) * MiB + rnd() % 4096, 1 + (uint32_t)(rnd() % (lp - i)), 0};
            layer[0].life = (uint32_t)(8 * lp); /* the layer's KV cache: the rest of the call */
            vram_step_plan_stats ps[5];
            for (int c = 0; c < 5; c++) {
                gen_call(&g, layer, lp, 1.0 + 0.125 * c, vary);
                audit(&g, "auto generation");
                vram_step_plan_get_stats(g.p, &ps[c]);
            }
            CHECK(ps[0].plans_built == 0 && ps[0].served == 0, "round %d: a plan in the first call (%llu served)", round,
                  (unsigned long long)ps[0].served);
            if (!vary) {
                CHECK(ps[1].plans_built == 1 && ps[1].last_period == lp && ps[4].plans_built >= 3 &&
                          ps[4].served > ps[4].requests / 2 - ps[0].requests,
                      "round %d: layer plans (period %zu) from the second call: %llu begun, period %llu, "
                      "%llu of %llu served",
                      round, lp, (unsigned long long)ps[4].plans_built, (unsigned long long)ps[1].last_period,
                      (unsigned long long)ps[4].served, (unsigned long long)ps[4].requests);
            } else {
                CHECK(ps[1].plans_built == 1 && ps[1].plans_retired == 1 && ps[4].plans_built == 1,
                      "round %d: a layer plan that served little rules them out: %llu begun by the second "
                      "call, %llu by the last",
                      round, (unsigned long long)ps[1].plans_built, (unsigned long long)ps[4].plans_built);
            }
            prog_close(&g, "auto generation");
            free(layer);
            if (!vary) rng_state = seed; /* the same calls, varied */
        }
        /* training: test_early's program under auto on the sim device */
        prog g;
        vram_step_plan_config cfg = {0};
        cfg.auto_plan = 1;
        prog_open_cfg(&g, &cfg);
        size_t n = 160 + rnd() % 200, np = 8 + rnd() % 16;
        op *step = calloc(n, sizeof *step), *param = calloc(np, sizeof *param);
        make_step(step, n);
        for (size_t i = 0; i < n; i++) step[i].life = 1 + (uint32_t)(rnd() % (n - i));
        for (size_t i = 0; i < 64; i++) step[i] = (op){2 * MiB + rnd() % 4096, 1 + (uint32_t)(rnd() % 4), 0};
        for (size_t i = 0; i < np; i++) param[i] = (op){8 * MiB + (rnd() % 16) * MiB, 0, 0};
        for (size_t i = 0; i < np; i++) request(&g, &param[i]);
        for (int s = 0; s < 6; s++) {
            for (size_t i = 0; i < n; i++) request(&g, &step[i]);
            for (size_t i = 0; s == 0 && i < 2 * np; i++) request(&g, &param[i / 2]);
        }
        audit(&g, "auto training");
        vram_stats st;
        vram_allocator_get_stats(g.a, &st);
        vram_step_plan_stats ps;
        vram_step_plan_get_stats(g.p, &ps);
        int64_t held = st.reserved_bytes[VRAM_POOL_ALL].peak, used = st.allocated_bytes[VRAM_POOL_ALL].peak;
        CHECK(held <= used + used / 32 && ps.plans_built == 0 && ps.served == 0,
              "round %d: best fit within 1/32 (%lld of %lld) and no plan (%llu begun; `early` plans this program)",
              round, (long long)held, (long long)used, (unsigned long long)ps.plans_built);
        prog_close(&g, "auto training");
        free(step);
        free(param);
    }
}

static void test_layer_args(void) {
    vram_step_plan *p = NULL;
    CHECK(vram_step_plan_new(NULL, NULL, &p) == VRAM_ERR_INVALID_ARG && !p, "no allocator");
    vram_device *dev;
    vram_allocator *a;
    CHECK_OK(vram_device_open("sim:8GiB", &dev));
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    CHECK_OK(vram_step_plan_new(a, NULL, &p));
    void *x = NULL;
    CHECK(vram_step_plan_malloc(p, 1024, 0, VRAM_TAG_OTHER, NULL) == VRAM_ERR_INVALID_ARG, "null ptr");
    CHECK(vram_step_plan_malloc(p, 64ull << 30, 0, VRAM_TAG_OTHER, &x) == VRAM_ERR_OUT_OF_MEMORY && !x, "too large");
    vram_step_plan_stats ps;
    vram_step_plan_get_stats(p, &ps);
    CHECK(ps.requests == 0, "a failed request is not recorded (%llu)", (unsigned long long)ps.requests);
    CHECK_OK(vram_step_plan_malloc(p, 4 * MiB, 0, VRAM_TAG_OTHER, &x));
    CHECK_OK(vram_step_plan_free(p, x));
    vram_step_plan_destroy(p);
    vram_step_plan_destroy(NULL);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

int main(void) {
    const char *seed = getenv("VRAM_TEST_SEED");
    if (seed) rng_state = strtoull(seed, NULL, 10) | 1;
    test_solver();
    test_layer_args();
    test_regular();
    test_deviations();
    test_early();
    test_auto();
    return check_done();
}

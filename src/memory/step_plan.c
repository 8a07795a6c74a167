/* step_plan.c — learned placement for repeating steps (include/vram/step_plan.h): a layer
 * that recognises a repeating sequence of large requests, solves a whole period's placement
 * offline (step_plan_solve.c) and serves the following periods from one arena block.
 *
 * History: each large request gets a sequence number n and a record (size rounded to 512 B,
 * stream, ticks of its allocation and free). A hash of the last `window` sizes maps to the
 * newest n that ended an equal window; a hit at j proposes the period P = n - j, a plan once a
 * whole period has matched request for request. Entry k of the plan is the request P back from
 * the k-th to come, with its lifetime (or its predecessor's, a period earlier); long-lived or
 * unknown ones are not placed. The plan begins at the template's low point of live bytes, only
 * where its arena fits under the reserved peak so far. Serving: request k takes entry k mod P
 * when size and stream match, the plan is in step and no live arena block (a sorted array by
 * offset) overlaps; else the allocator serves it (a miss). A ptr -> n map (open addressing)
 * finds the records of blocks the allocator served. Early plans (cfg.early) take the program's
 * first step as the template and begin in its second (early_settle, early_fits, early_skip).
 * Auto (cfg.auto_plan) decides per confirmed period which kind may be planned: whole steps as
 * early plans, a model's layers as generation's prefill (auto_allows).
 */
#include <stdlib.h>
#include <string.h>

#include "vram/step_plan.h"
#include "vram/vram.h"

#define NONE UINT64_MAX
#define HISTORY_CAP (1u << 20) /* records kept before learning starts over */
#define TABLE_BITS 16
#define STEP_PERIOD 64   /* auto: periods from this many requests are whole steps, shorter ones a model's layers */
#define STEP_GAIN_DIV 32 /* auto: a whole step is planned only where best fit's reserved peak is more than
                          * 1/32 above its allocated peak (auto_allows) */

typedef struct {
    uint64_t size, t_alloc, t_free;
    vram_stream stream;
} record;

typedef struct {
    uint64_t off, size, n;
} live_block;

typedef struct {
    uint64_t base, size; /* the arena block; 0: none */
    live_block *live;    /* sorted by off */
    size_t nlive, cap;
    uint64_t live_bytes;
} arena;

typedef struct { /* ptr -> n, linear probing, keys 0 = empty */
    uint64_t *keys, *vals;
    size_t cap, count;
} ptr_map;

struct vram_step_plan {
    vram_allocator *a;
    vram_step_plan_config cfg;
    record *hist;
    uint64_t base, count, hcap; /* records hold sequence numbers [base, base + count) */
    uint64_t tick;
    uint64_t table[1u << TABLE_BITS]; /* window hash -> n + 1 (0: none) */
    uint64_t cand_p, cand_matched;    /* the proposed period and how many requests confirmed it */
    /* the plan: solved and waiting for its first request (pending), or serving (active) */
    int pending, active;
    uint64_t activate_at, arena_size;
    uint64_t *low, low_limit; /* per entry: planned bytes live in the template then; the limit to begin */
    uint64_t period, first; /* entry k serves request first + k - shift + m * period */
    uint64_t shift;         /* entries skipped so far (early plans: the first step's one-time requests) */
    /* early plans (cfg.early): solved before the first step's blocks are freed, solved again once
     * enough of them are (freed_bytes), and begun only then (settled) */
    int early_plan, settled;
    uint64_t freed_bytes, built_at;
    uint64_t *off;          /* per entry: offset, NONE when not placed */
    uint64_t *esize;
    vram_stream stream;
    uint32_t misses;   /* in a row */
    uint32_t dry;      /* misses since the plan last served (early plans retire at miss_limit) */
    int fed;           /* the plan served a request since it began (an early plan that has not
                        * retires at its first miss: its proposal was a coincidence) */
    int in_step;       /* the last requests matched the plan (see serve) */
    uint32_t step_run; /* matches in a row since it was last out of step */
    uint32_t waits;    /* low points a pending plan let pass because its arena did not fit */
    uint64_t min_period; /* the shortest period proposed: doubled by each plan retired early */
    uint64_t next_try; /* the first request after which a failed plan is tried again */
    uint32_t backoff;  /* plans given up in a row: each doubles the wait before the next solve */
    /* auto (cfg.auto_plan): which kind of plan the stream asks for (auto_allows) */
    int layer_plan;        /* the pending or active plan is a layer plan: it may begin above the peak so far */
    int layers_ok;         /* layer plans allowed: a layer's period came back at another shape */
    int layers_off;        /* layer plans ruled out for good */
    uint64_t sig_p, sig_h; /* the last short period confirmed, and its sizes' hash (free of their order) */
    uint64_t layer_served, layer_requests; /* the counters when the layer plan began: its share served */
    uint64_t gate_next;    /* the first request at which a whole step's gain is read again */
    arena cur;       /* the active (or draining) plan's arena */
    ptr_map map;
    vram_step_plan_stats st;
};

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static record *rec(vram_step_plan *p, uint64_t n) { return n >= p->base && n < p->base + p->count ? &p->hist[n - p->base] : NULL; }

/* ---- ptr -> n ---- */

/* (splitmix64's finalizer: addresses are 512-byte aligned, their low bits all equal) */
static size_t slot_of(const ptr_map *m, uint64_t key) {
    key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ull;
    key = (key ^ (key >> 27)) * 0x94d049bb133111ebull;
    return (size_t)((key ^ (key >> 31)) & (m->cap - 1));
}

static int map_put(ptr_map *m, uint64_t key, uint64_t val) {
    if (2 * (m->count + 1) > m->cap) {
        size_t ncap = m->cap ? 2 * m->cap : 256;
        uint64_t *nk = calloc(ncap, sizeof *nk), *nv = calloc(ncap, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -1;
        }
        ptr_map old = *m;
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
        m->count = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.keys[i]) map_put(m, old.keys[i], old.vals[i]);
        free(old.keys);
        free(old.vals);
    }
    size_t i = slot_of(m, key);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->count++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

/* Removes key; returns its value, or NONE. Backward-shift deletion keeps probes unbroken. */
static uint64_t map_take(ptr_map *m, uint64_t key) {
    if (!m->cap) return NONE;
    size_t i = slot_of(m, key);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) return NONE;
    uint64_t val = m->vals[i];
    for (size_t j = (i + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
        size_t home = slot_of(m, m->keys[j]);
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->count--;
    return val;
}

/* ---- the arena's live blocks ---- */

/* The index of the first live block whose offset is >= off. */
static size_t live_lower(const arena *ar, uint64_t off) {
    size_t lo = 0, hi = ar->nlive;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ar->live[mid].off < off) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int live_overlaps(const arena *ar, uint64_t off, uint64_t size) {
    size_t i = live_lower(ar, off);
    if (i < ar->nlive && ar->live[i].off < off + size) return 1;
    return i > 0 && ar->live[i - 1].off + ar->live[i - 1].size > off;
}

static int live_insert(arena *ar, uint64_t off, uint64_t size, uint64_t n) {
    if (ar->nlive == ar->cap) {
        size_t ncap = ar->cap ? 2 * ar->cap : 64;
        live_block *nl = realloc(ar->live, ncap * sizeof *nl);
        if (!nl) return -1;
        ar->live = nl;
        ar->cap = ncap;
    }
    size_t i = live_lower(ar, off);
    memmove(&ar->live[i + 1], &ar->live[i], (ar->nlive - i) * sizeof *ar->live);
    ar->live[i] = (live_block){off, size, n};
    ar->nlive++;
    ar->live_bytes += size;
    return 0;
}

/* ---- learning ---- */

static void history_reset(vram_step_plan *p) {
    p->base += p->count;
    p->count = 0;
    p->cand_p = p->cand_matched = 0;
    memset(p->table, 0, sizeof p->table);
}

static int history_add(vram_step_plan *p, uint64_t size, vram_stream stream) {
    if (p->count == HISTORY_CAP) history_reset(p);
    if (p->count == p->hcap) {
        uint64_t ncap = p->hcap ? 2 * p->hcap : 1024;
        record *nh = realloc(p->hist, ncap * sizeof *nh);
        if (!nh) return -1;
        p->hist = nh;
        p->hcap = ncap;
    }
    p->hist[p->count++] = (record){size, p->tick++, NONE, stream};
    return 0;
}

static int same(const vram_step_plan *p, uint64_t i, uint64_t j) {
    const record *x = &p->hist[i - p->base], *y = &p->hist[j - p->base];
    return x->size == y->size && x->stream == y->stream;
}

/* After request n was recorded: updates the proposed period; returns 1 when it is confirmed, 2
 * when it is an early plan's (cfg.early) proposal. */
static int learn(vram_step_plan *p, uint64_t n) {
    uint64_t W = p->cfg.window;
    if (p->cand_p) {
        if (n - p->cand_p >= p->base && same(p, n, n - p->cand_p)) {
            /* a whole period must repeat: shorter repeats (a model's layers) propose periods that
             * the step as a whole does not keep */
            uint64_t confirm = p->cfg.auto_plan && p->cand_p < STEP_PERIOD ? p->cfg.window : p->cfg.confirm;
            uint64_t need = p->cand_p > confirm ? p->cand_p : confirm;
            if (++p->cand_matched >= need) return 1;
        } else {
            p->cand_p = p->cand_matched = 0;
        }
    }
    if (n + 1 < p->base + W) return 0;
    uint64_t h = 0;
    for (uint64_t i = n + 1 - W; i <= n; i++) h = mix(h, p->hist[i - p->base].size * 64 + p->hist[i - p->base].stream);
    uint64_t *slot = &p->table[h >> (64 - TABLE_BITS)];
    uint64_t j = *slot ? *slot - 1 : NONE;
    *slot = n + 1;
    if (p->cand_p || j == NONE || j < p->base || j >= n || n - j > p->cfg.max_period || n - j < p->min_period ||
        j + 1 < p->base + W)
        return 0;
    for (uint64_t m = 0; m < W; m++) /* the hash may collide: the windows must be equal */
        if (!same(p, n - m, j - m)) return 0;
    p->cand_p = n - j;
    p->cand_matched = W;
    /* early: a period that spans most of the history is the program's step repeating for the
     * first time (the repeats within a step, its layers, span a fraction of it) */
    if (p->cfg.early && !p->cur.base && 4 * p->cand_p >= 3 * (n + 1 - p->base) &&
        (!p->cfg.auto_plan || p->cand_p >= STEP_PERIOD))
        return 2;
    return 0; /* (confirmed only by the requests to come: a whole period must repeat) */
}

/* The lifetime in ticks of the request that entry k copies (t: its sequence number), or, when
 * that one is still live, of the one a period before it if it was of the same size; 0 when
 * unknown or not shorter than a period (`ticks`). */
static uint64_t lifetime(vram_step_plan *p, uint64_t t, uint64_t P, uint64_t ticks) {
    const record *r = rec(p, t);
    if (r && r->t_free == NONE && t >= P) {
        const record *q = rec(p, t - P);
        r = q && q->size == r->size && q->stream == r->stream ? q : NULL;
    }
    if (!r || r->t_free == NONE) return 0;
    uint64_t d = r->t_free - r->t_alloc;
    return d < ticks ? d : 0;
}

/* Solves the plan for the requests after n from the period P that ends at n; 0 on success.
 * The plan waits (pending) for the request at which the template held the fewest planned
 * bytes live (a step's boundary): the arena is made there, so that what the learning steps
 * still hold outside it is least. */
static int build(vram_step_plan *p, uint64_t n, uint64_t P) {
    uint64_t first = n + 1 - P; /* the template: requests [first, n] */
    const record *r0 = rec(p, first), *rn = rec(p, n), *rp = rec(p, n - P);
    if (!r0 || !rn || !rp) return -1;
    uint64_t ticks = rn->t_alloc - rp->t_alloc; /* a period, in ticks */
    if (!ticks) return -1;
    uint64_t *sz = calloc(P, sizeof *sz), *s = calloc(P, sizeof *s), *e = calloc(P, sizeof *e),
             *idx = calloc(P, sizeof *idx), *off = calloc(P, sizeof *off), *esize = calloc(P, sizeof *esize),
             *plan_off = malloc(P * sizeof *plan_off);
    int ok = sz && s && e && idx && off && esize && plan_off;
    size_t m = 0;
    uint64_t arena_size = 0, peak = 0, least = NONE, kmin = 0;
    vram_stream stream = rn->stream;
    for (uint64_t k = 0; ok && k < P; k++) {
        const record *r = rec(p, first + k);
        esize[k] = r->size;
        plan_off[k] = NONE;
        uint64_t d = r->stream == stream ? lifetime(p, first + k, P, ticks) : 0;
        uint64_t start = r->t_alloc - r0->t_alloc;
        if (!d || start >= ticks) continue;
        sz[m] = r->size;
        s[m] = start;
        e[m] = start + d;
        idx[m++] = k;
    }
    if (ok && m) ok = vram_step_plan_solve(m, sz, s, e, ticks, off, &arena_size) == VRAM_OK;
    if (ok && m && arena_size) {
        /* the planned bytes live, cyclically, when each request of the template came: their peak
         * is the arena's floor, their least the moment to start */
        uint64_t *at = malloc(P * sizeof *at);
        ok = at != NULL;
        for (uint64_t k = 0; ok && k < P; k++) {
            uint64_t t = rec(p, first + k)->t_alloc - r0->t_alloc, live = 0;
            for (size_t j = 0; j < m; j++)
                if ((s[j] <= t && t < e[j]) || t + ticks < e[j]) live += sz[j];
            at[k] = live;
            if (live > peak) peak = live;
            if (live < least) least = live;
        }
        /* the first request at which about the fewest are live (within 1/16 of the floor) */
        for (kmin = 0; ok && kmin < P && at[kmin] > least + peak / 16; kmin++) {
        }
        free(p->low);
        p->low = at; /* kept: where the plan may begin */
        p->low_limit = least + peak / 16;
    }
    if (ok && m && arena_size) {
        for (size_t i = 0; i < m; i++) plan_off[idx[i]] = off[i];
        free(p->off);
        free(p->esize);
        p->off = plan_off;
        p->esize = esize;
        plan_off = esize = NULL;
        p->pending = 1;
        p->waits = 0;
        p->period = P;
        p->first = n + 1;
        p->shift = 0;
        p->freed_bytes = 0;
        p->built_at = n;
        p->activate_at = n + 1 + kmin;
        p->stream = stream;
        p->arena_size = arena_size;
        p->st.last_period = P;
        p->st.last_planned = m;
        p->st.last_arena_bytes = arena_size;
        p->st.last_live_peak_bytes = peak;
    }
    free(sz);
    free(s);
    free(e);
    free(idx);
    free(off);
    free(esize);
    free(plan_off);
    return p->pending ? 0 : -1;
}

static void arena_release_if_drained(vram_step_plan *p) {
    if (!p->active && p->cur.base && !p->cur.nlive) {
        vram_allocator_free(p->a, (void *)(uintptr_t)p->cur.base);
        p->cur.base = p->cur.size = 0;
        /* the arena's pages go back too: the best fit that serves from now on places its
         * requests as if it ran alone, not around one large cached hole */
        vram_allocator_empty_cache(p->a);
    }
}

void vram_step_plan_retire(vram_step_plan *p) {
    if (p) p->pending = 0;
    if (!p || !p->active) return;
    p->active = 0;
    p->early_plan = 0;
    p->st.plans_retired++;
    /* a layer plan that served less than half of what came while it was active did not find
     * generation's prefill: its arena only perturbed the best fit around it */
    if (p->layer_plan && 2 * (p->st.served - p->layer_served) < p->st.requests - p->layer_requests) p->layers_off = 1;
    p->layer_plan = 0;
    /* a plan that did not last two periods was likely a repeat within the step (a model's
     * layers): look for longer ones */
    if (p->base + p->count < p->first + 2 * p->period && p->min_period <= p->period) p->min_period = 2 * p->period;
    p->cand_p = p->cand_matched = 0;
    arena_release_if_drained(p);
}

/* Makes the pending plan's arena and starts serving from it; 0 on success. The arena takes the
 * memory the learning steps held: what they left cached goes back first, else the arena would
 * come on top of it (and reserved memory with it). */
static int activate(vram_step_plan *p) {
    void *ptr = NULL;
    p->pending = 0;
    vram_allocator_empty_cache(p->a);
    if (vram_allocator_malloc(p->a, p->arena_size, p->stream, VRAM_TAG_OTHER, &ptr) != VRAM_OK) return -1;
    p->active = 1;
    p->in_step = 1;
    p->misses = 0;
    p->dry = 0;
    p->fed = 0;
    p->cur.base = (uint64_t)(uintptr_t)ptr;
    p->cur.size = p->arena_size;
    p->st.plans_built++;
    if (p->cfg.auto_plan && !p->layer_plan) p->layers_off = 1; /* a whole step planned: training */
    p->layer_served = p->st.served;
    p->layer_requests = p->st.requests;
    return 0;
}

/* An early plan begins in the program's second step, the first with the optimizer's state,
 * whose peak is above the first step's whatever the placement: the rule against raising the
 * peak so far cannot apply. It begins where the blocks its entries place that are live now
 * outside the arena (the template's and this period's, which the arena would duplicate) come to
 * at most 1/16 of the arena: a step's boundary, not a guess of one; only once `confirm`
 * requests of the second step have repeated the first's; and only where the first step kept
 * blocks of at least 1/16 of the arena for good (the optimizer's state: why the second step's
 * peak is the program's; a program that keeps nothing, inference, gains nothing from it). */
static int early_fits(vram_step_plan *p) {
    if (p->cand_p != p->period || p->cand_matched < p->cfg.confirm) return 0; /* not yet a repeat */
    uint64_t P = p->period, start = p->first - P, end = p->base + p->count, dup = 0, kept = 0;
    for (uint64_t m = start < p->base ? p->base : start; m + 1 < end; m++) {
        const record *r = rec(p, m);
        if (!r || r->t_free != NONE) continue;
        if (p->off[(m - start) % P] != NONE) dup += r->size; /* the arena would place it again */
        else if (m < p->first) kept += r->size;             /* the template allocated it for good */
    }
    return dup <= p->arena_size / 16 && kept >= p->arena_size / 16;
}

/* Whether the arena, made now beside what is allocated, stays under the reserved peak so far
 * (less a margin for the holes among the blocks that stay): a plan must not raise the peak the
 * learning steps set. Else the pending plan waits for its next low point. The margin, 1/64, is
 * narrow enough that a plan may still begin where fine chunks have already placed the learning
 * steps within a few percent of their floor (there the plan is what stops their page moves). */
static int fits_now(vram_step_plan *p) {
    if (p->cfg.may_raise_peak || p->layer_plan) return 1;
    if (p->early_plan) return early_fits(p);
    vram_stats x;
    vram_allocator_get_stats(p->a, &x);
    uint64_t allocated = (uint64_t)x.allocated_bytes[VRAM_POOL_ALL].current;
    uint64_t peak = (uint64_t)x.reserved_bytes[VRAM_POOL_ALL].peak;
    return allocated + p->arena_size <= peak - peak / 64;
}

/* A plan that could not begin (no arena, or never under the peak): learning goes on, but the
 * next solve, O(period^2), waits 2, 4, ... 1024 periods, so that a program whose plan never
 * fits pays for a solve only now and then. */
static void give_up(vram_step_plan *p, uint64_t n) {
    p->pending = 0;
    p->next_try = n + (p->period << p->backoff);
    if (p->backoff < 10) p->backoff++;
}

/* The pending plan at request n (its activate_at): begins, or moves to its next low point. */
static void begin_or_wait(vram_step_plan *p, uint64_t n) {
    if (fits_now(p)) {
        if (activate(p) != 0) give_up(p, n);
        else p->backoff = 0;
        return;
    }
    uint64_t k = (n - p->first) % p->period, d = 1;
    if (p->early_plan && p->low[(k + 1) % p->period] <= p->low_limit) { /* still at the low: the next request */
        p->activate_at = n + 1;
        return;
    }
    for (; d <= p->period && p->low[(k + d) % p->period] > p->low_limit; d++) {
    }
    p->activate_at = n + d;
    if (++p->waits > 4) give_up(p, n); /* it never fits */
}

/* An early plan was solved while the first step's last blocks (gradients, the optimizer's
 * temporaries) were still live, so without their lifetimes. Once blocks of the template of at
 * least 1/16 of the arena have been freed since (zero_grad), it is solved again from the last
 * period and may begin at its next low point; until then it waits. A plan whose template frees
 * nothing for an eighth of a period (it held nothing more) begins as it is. */
static void early_settle(vram_step_plan *p, uint64_t n) {
    uint64_t P = p->period;
    if (p->freed_bytes >= p->arena_size / 16) {
        p->pending = 0;
        if (build(p, n, P) != 0) {
            p->period = P;
            p->early_plan = 0;
            give_up(p, n);
            return;
        }
        p->settled = 1;
    } else if (n >= p->built_at + P / 8) {
        p->settled = 1;
    } else if (n == p->activate_at) {
        p->activate_at++;
    }
}

/* Early plans: the first step allocated the optimizer's state (still live, not placed); the
 * later steps do not. Where the request is the one after such entries, they are skipped. */
static uint64_t early_skip(vram_step_plan *p, uint64_t k, uint64_t rsize) {
    uint64_t P = p->period, k2 = k, d = 0;
    for (; d < P; d++, k2 = (k2 + 1) % P) {
        const record *t = rec(p, p->first - P + k2);
        if (!t || t->t_free != NONE || p->off[k2] != NONE) break;
    }
    if (!d || d == P || p->esize[k2] != rsize) return k;
    p->shift = (p->shift + d) % P;
    return k2;
}

/* auto (cfg.auto_plan): whether the period confirmed at n may be planned. Whole steps (as
 * `early` plans them) only where best fit's reserved peak so far is more than 1/32 above its
 * allocated peak: a plan leaves holes of its own beside its arena and perturbs what stays
 * outside it, so where best fit is already that close it has nothing to gain. A short period (a
 * model's layers) only once the same period has come back at another shape (its sizes' sum of
 * hashes differs: generation's next call, another prompt) and no whole step has been planned:
 * training repeats its layers at one shape, and its forward and backward passes differ in
 * period; a single call (one prefill) gets no layer plan. */
static int auto_allows(vram_step_plan *p, uint64_t n) {
    uint64_t P = p->cand_p, h = 0;
    if (P >= STEP_PERIOD) {
        if (n < p->gate_next) return 0;
        vram_stats x;
        vram_allocator_get_stats(p->a, &x);
        uint64_t held = (uint64_t)x.reserved_bytes[VRAM_POOL_ALL].peak;
        uint64_t used = (uint64_t)x.allocated_bytes[VRAM_POOL_ALL].peak;
        if (held > used + used / STEP_GAIN_DIV) return 1;
        /* asked again a few requests later: the reading costs a copy of the statistics */
        p->gate_next = n + p->cfg.window;
        return 0;
    }
    if (p->layers_off) return 0;
    if (p->layers_ok) return 1;
    for (uint64_t m = n + 1 - P; m <= n; m++) h += mix(0, rec(p, m)->size * 64 + rec(p, m)->stream);
    if (p->sig_p == P && p->sig_h != h) {
        p->layers_ok = 1;
        return 1;
    }
    p->sig_p = P;
    p->sig_h = h;
    return 0;
}

/* ---- the API ---- */

vram_status vram_step_plan_empty_cache(vram_step_plan *p) {
    if (!p) return vram_error(VRAM_ERR_INVALID_ARG, "step plan: empty_cache: null argument");
    vram_step_plan_retire(p);
    /* another program begins: its plans owe nothing to the last one's, and an early plan's first
     * step must be this program's (the history before it would hide the step's first repeat) */
    history_reset(p);
    p->backoff = 0;
    p->next_try = 0;
    p->min_period = p->cfg.min_period;
    p->layers_ok = p->layers_off = 0;
    p->sig_p = p->sig_h = 0;
    return vram_allocator_empty_cache(p->a);
}

vram_status vram_step_plan_new(vram_allocator *a, const vram_step_plan_config *cfg, vram_step_plan **out) {
    if (!a || !out) return vram_error(VRAM_ERR_INVALID_ARG, "step plan: null argument");
    *out = NULL;
    vram_step_plan *p = calloc(1, sizeof *p);
    if (!p) return vram_error(VRAM_ERR_HOST_MEMORY, "step plan: host out of memory");
    p->a = a;
    if (cfg) p->cfg = *cfg;
    if (!p->cfg.min_size) p->cfg.min_size = (1u << 20) + 1;
    if (!p->cfg.window) p->cfg.window = 8;
    if (!p->cfg.confirm) p->cfg.confirm = 32;
    if (p->cfg.confirm < p->cfg.window) p->cfg.confirm = p->cfg.window;
    if (!p->cfg.max_period) p->cfg.max_period = 8192;
    if (!p->cfg.miss_limit) p->cfg.miss_limit = 16;
    if (p->cfg.auto_plan) p->cfg.early = 1; /* whole steps as `early` plans them */
    if (!p->cfg.min_period) p->cfg.min_period = p->cfg.auto_plan ? 16 : 64;
    p->min_period = p->cfg.min_period;
    *out = p;
    return VRAM_OK;
}

void vram_step_plan_destroy(vram_step_plan *p) {
    if (!p) return;
    p->active = 0;
    if (p->cur.base) vram_allocator_free(p->a, (void *)(uintptr_t)p->cur.base);
    free(p->cur.live);
    free(p->hist);
    free(p->off);
    free(p->esize);
    free(p->low);
    free(p->map.keys);
    free(p->map.vals);
    free(p);
}

/* Serves request n from the plan when it matches and its range is free; 1 when served. A
 * request of another size or stream puts the plan out of step with the program: it serves again
 * only after `window` requests in a row have matched (a run of equal sizes elsewhere, such as
 * the next model's parameters, must not be taken for the plan's). */
static int serve(vram_step_plan *p, uint64_t n, uint64_t rsize, vram_stream stream, void **ptr) {
    uint64_t k = (n - p->first + p->shift) % p->period;
    if (p->early_plan) k = early_skip(p, k, rsize);
    if (p->esize[k] != rsize || stream != p->stream) {
        p->in_step = 0;
        p->step_run = 0;
        /* an early plan whose first step was not like the next (a proposal of the wrong period)
         * matches now and then by size but serves nothing: it must not keep its arena */
        if (++p->misses >= p->cfg.miss_limit || (p->early_plan && ++p->dry >= (p->fed ? p->cfg.miss_limit : 1)))
            vram_step_plan_retire(p);
        return 0;
    }
    p->misses = 0;
    if (!p->in_step) {
        if (++p->step_run >= p->cfg.window) p->in_step = 1;
        return 0;
    }
    uint64_t o = p->off[k];
    if (o == NONE || live_overlaps(&p->cur, o, rsize) || live_insert(&p->cur, o, rsize, n) != 0) return 0;
    *ptr = (void *)(uintptr_t)(p->cur.base + o);
    p->dry = 0;
    p->fed = 1;
    return 1;
}

vram_status vram_step_plan_malloc(vram_step_plan *p, size_t size, vram_stream stream, vram_tag tag, void **ptr) {
    if (!p || !ptr) return vram_error(VRAM_ERR_INVALID_ARG, "step plan: malloc: null argument");
    if (size < p->cfg.min_size) return vram_allocator_malloc(p->a, size, stream, tag, ptr);
    uint64_t rsize = ((uint64_t)size + 511) & ~(uint64_t)511;
    if (history_add(p, rsize, stream) != 0) return vram_error(VRAM_ERR_HOST_MEMORY, "step plan: host out of memory");
    uint64_t n = p->base + p->count - 1;
    p->st.requests++;
    int missed = 0;
    if (!p->active) {
        int confirmed = learn(p, n);
        if (p->pending && !p->cand_p) { /* the sequence changed before the plan began */
            p->pending = 0;
            p->early_plan = 0;
        }
        if (p->pending && p->early_plan && !p->settled) early_settle(p, n);
        if (p->pending && n == p->activate_at) {
            begin_or_wait(p, n);
        } else if (!p->pending && confirmed && !p->cur.base && n >= p->next_try &&
                   (!p->cfg.auto_plan || auto_allows(p, n))) {
            p->early_plan = confirmed == 2;
            p->layer_plan = p->cfg.auto_plan && p->cand_p < STEP_PERIOD;
            p->settled = 0;
            if (build(p, n, p->cand_p) != 0) {
                p->period = p->cand_p;
                p->early_plan = 0;
                give_up(p, n);
            }
        }
    }
    if (p->active) {
        if (serve(p, n, rsize, stream, ptr)) {
            p->st.served++;
            return VRAM_OK;
        }
        p->st.missed++;
        missed = 1;
    }
    vram_status st = vram_allocator_malloc(p->a, size, stream, tag, ptr);
    if (st != VRAM_OK) {
        p->count--; /* never allocated: no record */
        p->tick--;
        p->st.requests--;
        p->st.missed -= (uint64_t)missed;
        return st;
    }
    if (map_put(&p->map, (uint64_t)(uintptr_t)*ptr, n) != 0) {
        vram_allocator_free(p->a, *ptr);
        *ptr = NULL;
        p->count--;
        p->tick--;
        p->st.requests--;
        p->st.missed -= (uint64_t)missed;
        return vram_error(VRAM_ERR_HOST_MEMORY, "step plan: host out of memory");
    }
    return VRAM_OK;
}

vram_status vram_step_plan_free(vram_step_plan *p, void *ptr) {
    if (!p) return vram_error(VRAM_ERR_INVALID_ARG, "step plan: free: null argument");
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    if (p->cur.base && a >= p->cur.base && a < p->cur.base + p->cur.size) {
        size_t i = live_lower(&p->cur, a - p->cur.base);
        if (i >= p->cur.nlive || p->cur.live[i].off != a - p->cur.base)
            return vram_error(VRAM_ERR_INVALID_ARG, "step plan: free of %p, not a live block of the plan's arena", ptr);
        record *r = rec(p, p->cur.live[i].n);
        if (r) r->t_free = p->tick++;
        p->cur.live_bytes -= p->cur.live[i].size;
        memmove(&p->cur.live[i], &p->cur.live[i + 1], (p->cur.nlive - i - 1) * sizeof *p->cur.live);
        p->cur.nlive--;
        arena_release_if_drained(p);
        return VRAM_OK;
    }
    uint64_t n = ptr ? map_take(&p->map, a) : NONE;
    if (n != NONE) {
        record *r = rec(p, n);
        if (r) r->t_free = p->tick++;
        if (r && p->pending && p->early_plan && !p->settled && n + p->period >= p->first) p->freed_bytes += r->size;
    }
    return vram_allocator_free(p->a, ptr);
}

int vram_step_plan_owns(const vram_step_plan *p, const void *ptr) {
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    if (!p || !p->cur.base || a < p->cur.base || a >= p->cur.base + p->cur.size) return 0;
    size_t i = live_lower(&p->cur, a - p->cur.base);
    return i < p->cur.nlive && p->cur.live[i].off == a - p->cur.base;
}

void *vram_step_plan_arena_block(const vram_step_plan *p) {
    return p && p->cur.base ? (void *)(uintptr_t)p->cur.base : NULL;
}

void vram_step_plan_get_stats(const vram_step_plan *p, vram_step_plan_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!p) return;
    *out = p->st;
    out->arena_bytes = p->cur.size;
    out->arena_live_bytes = p->cur.live_bytes;
}

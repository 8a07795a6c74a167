/* test_grad_adopt.c — VRAM_GRAD_ADOPT (rt_internal.h): backward shares gradients by reference,
 * copies on write, lets a layer norm add into the gradient autograd holds, and drops the
 * embedding's unused scatter buffer; the gradients stay bit for bit those of the switch off.
 *
 * Three parts. Graphs on the CPU in f64 where one gradient reaches several holders (an add's two
 * inputs, the same tensor on both sides of an add, residual chains through layer norms, a second
 * gradient arriving while the shared one is still held elsewhere): every leaf gradient with the
 * switch on equals the one with it off, bit for bit. A small tied GPT in f32 on the CPU: the same
 * loss and gradients both ways, fewer copies, accumulates and allocations with it on. GPT-2 124M
 * at B=8, T=1024 in bf16 with kept weights on the planner's shape-only GPU runtime (the CUDA
 * table's slots): the counts of copies, accumulates and memsets a forward and backward queue, and
 * the allocations, each way (docs/runtime.md quotes them): the residual stream's copies and the
 * layer norms' accumulates gone with it on, everything as today with it off. The counting and
 * the GPT step are launch_counts.h's, shared with test_fewer_launches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch_counts.h"
#include "vram/ops.h"

static void set_adopt(int on) {
    setenv("VRAM_GRAD_ADOPT", on ? "1" : "0", 1);
}

/* ---- graphs in f64 ---- */

enum { N = 6, C = 8 };

/* A residual stream of `depth` steps through layer norms: x + ln(x) * w, twice from each x (the
 * two consumers a GPT block's stream has), then a weighted sum. */
static vram_tensor *residual_chain(vram_tensor *x, vram_tensor *w, int depth) {
    vram_tensor *h = vram_tensor_retain(x);
    for (int k = 0; k < depth; k++) {
        vram_tensor *a = NULL, *b = NULL, *h2 = NULL;
        CHECK_OK(vram_layer_norm(h, w, NULL, 1e-5, &a));
        CHECK_OK(vram_tanh(a, &b));
        CHECK_OK(vram_add(h, b, &h2));
        vram_tensor_free(a), vram_tensor_free(b), vram_tensor_free(h);
        h = h2;
    }
    return h;
}

/* out = the scalar for graph `which` of leaves x [N, C], y [N, C], w [C]. */
static vram_tensor *graph(int which, vram_tensor *x, vram_tensor *y, vram_tensor *w) {
    vram_tensor *u = NULL, *v = NULL, *h = NULL, *p = NULL, *q = NULL, *r = NULL, *out = NULL, *t = NULL;
    CHECK_OK(vram_scale(x, 2.0, &u));
    CHECK_OK(vram_tanh(y, &v));
    switch (which) {
        case 0: /* h = u + v; u and v each used again after: sum(h*h) + sum(u*u) + sum(v*x) */
            CHECK_OK(vram_add(u, v, &h));
            CHECK_OK(vram_mul(h, h, &p));
            CHECK_OK(vram_mul(u, u, &q));
            CHECK_OK(vram_mul(v, x, &r));
            CHECK_OK(vram_add(p, q, &t));
            vram_tensor_free(p), p = NULL;
            CHECK_OK(vram_add(t, r, &p));
            break;
        case 1: /* the same tensor on both sides: h = u + u, k = h + u, sum(k * v) */
            CHECK_OK(vram_add(u, u, &h));
            CHECK_OK(vram_add(h, u, &t));
            CHECK_OK(vram_mul(t, v, &p));
            break;
        case 2: /* adds nested on one stream: a = u + v; b = a + a; c = b + u; sum(c * b) + sum(ln(a) * v) */
            CHECK_OK(vram_add(u, v, &h));
            CHECK_OK(vram_add(h, h, &q));
            CHECK_OK(vram_add(q, u, &r));
            CHECK_OK(vram_mul(r, q, &t));
            vram_tensor_free(r), r = NULL;
            CHECK_OK(vram_layer_norm(h, w, NULL, 1e-5, &r));
            CHECK_OK(vram_mul(r, v, &p));
            vram_tensor_free(r), r = NULL;
            CHECK_OK(vram_add(t, p, &r));
            vram_tensor_free(p);
            p = r, r = NULL;
            break;
        case 3: /* h = u + v hands one gradient to u and v; u's layer norm adds into it while v's
                 * consumer r = v * v has not run (in one of the two orders of the sums) */
        case 4:
            CHECK_OK(vram_add(u, v, &h));
            CHECK_OK(vram_mul(h, h, &p));
            CHECK_OK(vram_layer_norm(u, w, NULL, 1e-5, &q));
            CHECK_OK(vram_mul(v, v, &r));
            if (which == 3) {
                CHECK_OK(vram_add(p, q, &t));
                vram_tensor_free(p), p = NULL;
                CHECK_OK(vram_add(t, r, &p));
            } else {
                CHECK_OK(vram_add(r, q, &t));
                vram_tensor_free(r), r = NULL;
                CHECK_OK(vram_add(t, p, &r));
                vram_tensor_free(p);
                p = r, r = NULL;
            }
            break;
        default: /* residual chains: from u, and from u + v, summed */
            h = residual_chain(u, w, 4);
            CHECK_OK(vram_add(u, v, &q));
            r = residual_chain(q, w, 3);
            CHECK_OK(vram_mul(h, r, &p));
            break;
    }
    CHECK_OK(vram_sum(p, &out));
    vram_tensor *all[] = { u, v, h, p, q, r, t };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vram_tensor_free(all[i]);
    return out;
}

static void fill(vram_runtime *rt, vram_tensor *t) {
    double *p = vram_tensor_data(t);
    for (int64_t i = 0; i < vram_tensor_numel(t); i++) p[i] = -1.0 + 2.0 * vram_runtime_uniform(rt);
}

static void graphs(vram_runtime *rt) {
    int64_t xs[2] = { N, C }, ws[1] = { C };
    vram_tensor *x = NULL, *y = NULL, *w = NULL;
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_F64, 2, xs, VRAM_TAG_PARAMETER, &x));
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_F64, 2, xs, VRAM_TAG_PARAMETER, &y));
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_F64, 1, ws, VRAM_TAG_PARAMETER, &w));
    if (!x || !y || !w) return;
    vram_runtime_seed(rt, 3);
    fill(rt, x), fill(rt, y), fill(rt, w);
    vram_tensor *leaves[3] = { x, y, w };
    for (int i = 0; i < 3; i++) vram_tensor_set_requires_grad(leaves[i], 1);
    for (int which = 0; which < 6; which++) {
        double g[2][2 * N * C + C];
        lc_counts c[2];
        for (int on = 0; on < 2; on++) {
            set_adopt(on);
            for (int i = 0; i < 3; i++) vram_tensor_zero_grad(leaves[i], 1);
            lc_counts before = lc_seen;
            vram_tensor *out = graph(which, x, y, w);
            if (out) CHECK_OK(vram_backward(out, NULL));
            vram_tensor_free(out);
            c[on] = lc_since(before);
            int64_t at = 0;
            for (int i = 0; i < 3; i++) {
                vram_tensor *gr = vram_tensor_grad(leaves[i]);
                CHECK(gr != NULL || (i == 2 && which < 2), "graph %d: leaf %d has no gradient", which, i);
                if (gr)
                    vram_tensor_to_f64(gr, g[on] + at);
                else
                    memset(g[on] + at, 0, sizeof(double) * (size_t)vram_tensor_numel(leaves[i])); /* (w unused) */
                at += vram_tensor_numel(leaves[i]);
            }
        }
        int differ = 0;
        for (int i = 0; i < 2 * N * C + C; i++) differ += memcmp(&g[0][i], &g[1][i], sizeof(double)) != 0;
        CHECK(differ == 0, "graph %d: %d gradient elements differ with VRAM_GRAD_ADOPT on", which, differ);
        CHECK(c[1].copies < c[0].copies, "graph %d: %lld copies with the switch on, %lld off", which,
              (long long)c[1].copies, (long long)c[0].copies);
        if (which == 5) /* (the chains' layer norms add into the stream's gradient) */
            CHECK(c[1].accumulates < c[0].accumulates, "graph 5: %lld accumulates on, %lld off",
                  (long long)c[1].accumulates, (long long)c[0].accumulates);
    }
    vram_tensor_free(x), vram_tensor_free(y), vram_tensor_free(w);
    unsetenv("VRAM_GRAD_ADOPT");
}

/* ---- GPT ---- */

static void gpt_cpu(vram_runtime *rt, vram_allocator *a) {
    enum { B = 2, T = 32, V = 97, W = 64, L = 2 };
    vram_gpt_config cfg = {
        .layers = L, .heads = 2, .width = W, .vocab = V, .context = T, .tied = 1, .init_std = 0.02
    };
    int32_t ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)((i * 7) % 11), targets[i] = (int32_t)((i * 5 + 3) % V);
    lc_step r[2];
    for (int on = 0; on < 2; on++) lc_gpt_step(rt, a, &cfg, B, T, ids, targets, "VRAM_GRAD_ADOPT", on, &r[on]);
    CHECK(r[0].loss == r[1].loss, "GPT on the CPU: loss %.9g with VRAM_GRAD_ADOPT on, %.9g off", r[1].loss, r[0].loss);
    CHECK(r[0].n_grads == r[1].n_grads && r[0].n_grads > (int64_t)V * W, "GPT: %lld and %lld gradient elements",
          (long long)r[0].n_grads, (long long)r[1].n_grads);
    int64_t differ = 0;
    for (int64_t i = 0; r[0].n_grads == r[1].n_grads && i < r[0].n_grads; i++)
        differ += memcmp(&r[0].grads[i], &r[1].grads[i], sizeof(float)) != 0;
    CHECK(differ == 0, "GPT on the CPU: %lld gradient elements differ with VRAM_GRAD_ADOPT on", (long long)differ);
    /* the residual stream: two adds a block and the embeddings' sum; the layer norms of the blocks */
    CHECK(r[0].c.copies - r[1].c.copies >= 2 * L && r[0].c.accumulates - r[1].c.accumulates == 2 * L,
          "GPT on the CPU: %lld copies and %lld accumulates on, %lld and %lld off", (long long)r[1].c.copies,
          (long long)r[1].c.accumulates, (long long)r[0].c.copies, (long long)r[0].c.accumulates);
    CHECK(r[1].allocs < r[0].allocs && r[1].peak <= r[0].peak,
          "GPT on the CPU: %lld allocations (peak %lld) on, %lld (%lld) off", (long long)r[1].allocs,
          (long long)r[1].peak, (long long)r[0].allocs, (long long)r[0].peak);
    free(r[0].grads), free(r[1].grads);
}

static void gpt2_plan(void) {
    vram_device *dev;
    vram_allocator *a;
    vram_runtime *rt = lc_open(1, &dev, &a);
    if (!rt) return;
    enum { L = 12, W = 768, V = 50257 }; /* lc_gpt2_124m's */
    vram_gpt_config cfg = lc_gpt2_124m();
    lc_step r[2];
    for (int on = 0; on < 2; on++) lc_gpt_step(rt, a, &cfg, 8, 1024, NULL, NULL, "VRAM_GRAD_ADOPT", on, &r[on]);
    for (int on = 0; on < 2; on++)
        printf("GPT-2 124M B=8 bf16, forward and backward, VRAM_GRAD_ADOPT=%d: %lld memsets (%.1f MiB), %lld copies, "
               "%lld accumulates; %lld allocations of %.1f MiB, peak %.1f MiB\n",
               on, (long long)r[on].c.zeros, (double)r[on].c.zero_bytes / 1048576.0, (long long)r[on].c.copies,
               (long long)r[on].c.accumulates, (long long)r[on].allocs, (double)r[on].bytes_allocated / 1048576.0,
               (double)r[on].peak / 1048576.0);
    const int64_t stream = 8LL * 1024 * W * 2; /* one [8, 1024, 768] bf16 gradient of the residual stream */
    /* Off: today's counts (test_fewer_launches, docs/runtime.md): 4 memsets, 25 accumulates. */
    CHECK(r[0].c.zeros == 4 && r[0].c.accumulates == 25,
          "GPT-2, switch off: %lld memsets, %lld accumulates (want 4, 25)", (long long)r[0].c.zeros,
          (long long)r[0].c.accumulates);
    /* On: the stream's gradient handed on by reference (both inputs of 2 adds a block, and the
     * token embeddings' of their f32 sum with the positions', whose broadcast sums anyway), the
     * layer norms' input gradients added in place (2 a block), the embedding's [V, C] f32 buffer
     * not taken, the head's two gradients (x's [8, 1024, 768] bf16, the tied table's [V, C]
     * f32) handed over by the classifier rather than copied. */
    int64_t copies = r[0].c.copies - r[1].c.copies, accs = r[0].c.accumulates - r[1].c.accumulates;
    CHECK(copies == 2 * L + 2 * L + 1 + 2 && accs == 2 * L && r[0].c.zeros == r[1].c.zeros,
          "GPT-2: %lld fewer copies (want %d), %lld fewer accumulates (want %d), memsets %lld -> %lld",
          (long long)copies, 4 * L + 3, (long long)accs, 2 * L, (long long)r[0].c.zeros, (long long)r[1].c.zeros);
    int64_t fewer = r[0].allocs - r[1].allocs, bytes = r[0].bytes_allocated - r[1].bytes_allocated;
    int64_t want = (4 * L + 2 * L) * stream + 2 * stream + (int64_t)V * W * 4 /* (the f32 sum: twice a bf16 one) */
                   + stream + (int64_t)V * W * 4;                              /* (the head's two) */
    CHECK(fewer == (4 * L + 1) + 2 * L + 1 + 2 && bytes == want,
          "GPT-2: %lld fewer allocations of %lld bytes (want %d of %lld)", (long long)fewer, (long long)bytes,
          6 * L + 4, (long long)want);
    CHECK(r[1].peak < r[0].peak, "GPT-2: peak %lld with the switch on, %lld off", (long long)r[1].peak,
          (long long)r[0].peak);
    vram_runtime_free(rt);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* The two switches take "0" or "1" (or nothing): any other value makes no runtime. */
static void bad_switches(vram_allocator *a) {
    static const char *const names[] = {"VRAM_GRAD_ADOPT", "VRAM_FEWER_LAUNCHES"};
    static const char *const values[] = {"yes", "2", "on", " 1"};
    for (int i = 0; i < 2; i++) {
        for (int v = 0; v < 4; v++) {
            setenv(names[i], values[v], 1);
            vram_runtime *rt = NULL, *shape = NULL;
            vram_status s = vram_runtime_new(a, 1, &rt), s2 = vram_runtime_new_shape_only(a, 1, &shape);
            CHECK(s == VRAM_ERR_INVALID_ARG && !rt && s2 == VRAM_ERR_INVALID_ARG && !shape,
                  "%s=%s: runtimes made (status %d, %d)", names[i], values[v], (int)s, (int)s2);
            CHECK(strstr(vram_last_error(), names[i]) != NULL, "%s=%s: the message '%s' does not name it", names[i],
                  values[v], vram_last_error());
            if (rt) vram_runtime_free(rt);
            if (shape) vram_runtime_free(shape);
        }
        for (int v = 0; v < 3; v++) {
            setenv(names[i], v == 0 ? "0" : v == 1 ? "1" : "", 1);
            vram_runtime *rt = NULL;
            CHECK(vram_runtime_new(a, 1, &rt) == VRAM_OK, "%s='%s' refused: %s", names[i], getenv(names[i]),
                  vram_last_error());
            if (rt) vram_runtime_free(rt);
        }
        unsetenv(names[i]);
    }
}

int main(void) {
    vram_device *dev;
    vram_allocator *a;
    vram_runtime *rt = lc_open(0, &dev, &a);
    if (rt) {
        graphs(rt);
        gpt_cpu(rt, a);
        vram_runtime_free(rt);
    }
    if (a) bad_switches(a);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    gpt2_plan();
    return check_done();
}

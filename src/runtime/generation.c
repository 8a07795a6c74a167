/* generation.c — the inference forward pass with a KV cache, sampling, generation and held-out
 * likelihood (infer.h).
 *
 * The forward works on rows of tokens flattened to [n*T, C]: embeddings (any weight format,
 * through embedding_lowp), then per block layer_norm, the qkv projection, kv_attention (which
 * appends this call's keys and values to the cache and attends over everything cached), the
 * output projection and residual, layer_norm, the MLP (GELU in the model's form) and residual,
 * then the final layer norm and the output head. A projection is the f32 op vram_linear for f32
 * weights and the linear_lowp kernel for bf16 and INT8 weights. Everything runs under no_grad,
 * so every intermediate is a temporary, freed as soon as the next one exists. The same code runs
 * on the CPU and on a GPU: token ids and positions are uploaded as tensors, the logits read
 * back to the host for sampling (a copy on the CPU, the step's one wait on a GPU).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer_internal.h"

struct vram_kv_cache {
    vram_lm *m;
    int batch;
    int64_t cap;
    int64_t *lens;
    vram_tensor **k, **v; /* [layers] of [batch, heads, cap, head_dim] */
};

vram_status vram_kv_cache_new(vram_lm *m, int batch, int64_t cap, vram_kv_cache **out) {
    const vram_gpt_config *g = &m->info.gpt;
    const vram_kernels *k = m->rt->k;
    if (!k->linear_lowp || !k->embedding_lowp || !k->kv_attention || !k->gelu_tanh)
        return vram_error(VRAM_ERR_UNSUPPORTED, "kv cache: the %s kernel table has no inference kernels", k->name);
    if (batch < 1 || cap < 1 || cap > g->context)
        return vram_error(VRAM_ERR_INVALID_ARG, "kv cache: batch %d, capacity %lld (context %d)", batch, (long long)cap,
                          g->context);
    vram_kv_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->lens = calloc((size_t)batch, sizeof *c->lens);
        c->k = calloc((size_t)g->layers, sizeof *c->k);
        c->v = calloc((size_t)g->layers, sizeof *c->v);
    }
    if (!c || !c->lens || !c->k || !c->v) {
        if (c) free(c->lens), free(c->k), free(c->v);
        free(c);
        return vram_error(VRAM_ERR_HOST_MEMORY, "kv cache: out of host memory");
    }
    c->m = m;
    c->batch = batch;
    c->cap = cap;
    int64_t shape[4] = {batch, g->heads, cap, g->width / g->heads};
    vram_status s = VRAM_OK;
    for (int l = 0; l < g->layers && s == VRAM_OK; l++) {
        s = vram_tensor_empty(m->rt, VRAM_DTYPE_F32, 4, shape, VRAM_TAG_KV_CACHE, &c->k[l]);
        if (s == VRAM_OK) s = vram_tensor_empty(m->rt, VRAM_DTYPE_F32, 4, shape, VRAM_TAG_KV_CACHE, &c->v[l]);
    }
    if (s != VRAM_OK) {
        vram_kv_cache_free(c);
        return s;
    }
    *out = c;
    return VRAM_OK;
}

void vram_kv_cache_free(vram_kv_cache *c) {
    if (!c) return;
    for (int l = 0; l < c->m->info.gpt.layers; l++) {
        vram_tensor_free(c->k[l]);
        vram_tensor_free(c->v[l]);
    }
    free(c->k);
    free(c->v);
    free(c->lens);
    free(c);
}

void vram_kv_cache_reset(vram_kv_cache *c, int row) {
    for (int b = 0; b < c->batch; b++)
        if (row < 0 || b == row) c->lens[b] = 0;
}

int64_t vram_kv_cache_len(const vram_kv_cache *c, int row) { return row >= 0 && row < c->batch ? c->lens[row] : 0; }

uint64_t vram_kv_cache_bytes(const vram_kv_cache *c) {
    uint64_t b = 0;
    for (int l = 0; l < c->m->info.gpt.layers; l++) b += vram_tensor_storage_bytes(c->k[l]) + vram_tensor_storage_bytes(c->v[l]);
    return b;
}

/* y [R, N] = x [R, K] W^T + b for weight w in any format. */
static vram_status lm_linear(vram_lm *m, vram_tensor *x, const vram_lm_weight *w, const vram_lm_weight *b, vram_tensor **y) {
    if (w->fmt == VRAM_WFMT_F32) return vram_linear(x, w->t, b ? b->t : NULL, y);
    int64_t R = x->shape[0];
    vram_status s = vram_tensor_empty(m->rt, VRAM_DTYPE_F32, 2, (int64_t[]){R, w->rows}, VRAM_TAG_TEMPORARY, y);
    if (s != VRAM_OK) return s;
    m->rt->k->linear_lowp(m->rt, w->fmt, R, w->rows, w->cols, vram_tensor_data(x), vram_tensor_data(w->t),
                          b ? vram_tensor_data(b->t) : NULL, vram_tensor_data(*y));
    return VRAM_OK;
}

/* x = lookup(wte, ids) + lookup(wpe, positions): [n*T, C]. The token ids and positions are
 * host memory, uploaded to the device as two id tensors (a copy on the CPU). */
static vram_status lm_embed(vram_lm *m, const vram_kv_cache *c, int row0, int n, int64_t T, const int32_t *ids,
                            vram_tensor **x) {
    int64_t C = m->info.gpt.width, R = n * T;
    vram_tensor *tok = NULL, *pos = NULL, *pid = NULL, *tid = NULL;
    int32_t *p = malloc(sizeof *p * (size_t)R);
    if (!p) return vram_error(VRAM_ERR_HOST_MEMORY, "lm forward: out of host memory");
    for (int b = 0; b < n; b++)
        for (int64_t t = 0; t < T; t++) p[b * T + t] = (int32_t)(c->lens[row0 + b] + t);
    vram_status s = vram_tensor_from_data(m->rt, VRAM_DTYPE_I32, 1, &R, VRAM_TAG_TEMPORARY, p, &pid);
    if (s == VRAM_OK) s = vram_tensor_from_data(m->rt, VRAM_DTYPE_I32, 1, &R, VRAM_TAG_TEMPORARY, ids, &tid);
    if (s == VRAM_OK) s = vram_tensor_empty(m->rt, VRAM_DTYPE_F32, 2, (int64_t[]){R, C}, VRAM_TAG_TEMPORARY, &tok);
    if (s == VRAM_OK) s = vram_tensor_empty(m->rt, VRAM_DTYPE_F32, 2, (int64_t[]){R, C}, VRAM_TAG_TEMPORARY, &pos);
    if (s == VRAM_OK) {
        const vram_lm_weight *wte = &m->w[LM_WTE], *wpe = &m->w[LM_WPE];
        m->rt->k->embedding_lowp(wte->fmt, R, C, wte->rows, vram_tensor_data(tok), vram_tensor_data(wte->t),
                                 vram_tensor_data(tid));
        m->rt->k->embedding_lowp(wpe->fmt, R, C, wpe->rows, vram_tensor_data(pos), vram_tensor_data(wpe->t),
                                 vram_tensor_data(pid));
        s = vram_add(tok, pos, x);
    }
    vram_tensor_free(tok);
    vram_tensor_free(pos);
    vram_tensor_free(pid);
    vram_tensor_free(tid);
    free(p);
    return s;
}

/* Replaces *x (taking its reference) by x + f(layer_norm(x)) for the attention (mlp 0) or MLP. */
static vram_status lm_block_half(vram_lm *m, vram_kv_cache *c, int l, int row0, int n, int64_t T, int mlp,
                                 vram_tensor **x) {
    const vram_lm_weight *w = &m->w[LM_LAYER0 + LM_LAYER_SLOTS * l];
    const vram_gpt_config *g = &m->info.gpt;
    vram_tensor *h = NULL, *a = NULL, *b = NULL, *y = NULL;
    int lw = mlp ? LM_LN2_W : LM_LN1_W;
    vram_status s = vram_layer_norm(*x, w[lw].t, w[lw + 1].t, 1e-5, &h);
    if (s == VRAM_OK) s = lm_linear(m, h, &w[mlp ? LM_FC_W : LM_ATTN_W], &w[mlp ? LM_FC_B : LM_ATTN_B], &a);
    vram_tensor_free(h);
    h = NULL;
    if (s == VRAM_OK && !mlp) {
        int64_t H = g->heads, D = g->width / g->heads;
        vram_tensor *scores = NULL;
        s = vram_tensor_empty(m->rt, VRAM_DTYPE_F32, 2, (int64_t[]){n * T, g->width}, VRAM_TAG_TEMPORARY, &h);
        if (s == VRAM_OK) s = vram_tensor_empty(m->rt, VRAM_DTYPE_F32, 1, &c->cap, VRAM_TAG_TEMPORARY, &scores);
        if (s == VRAM_OK) {
            int64_t row_elems = H * c->cap * D;
            m->rt->k->kv_attention(m->rt, n, T, H, D, vram_tensor_data(a), (float *)vram_tensor_data(c->k[l]) + row0 * row_elems,
                                   (float *)vram_tensor_data(c->v[l]) + row0 * row_elems, c->cap, c->lens + row0,
                                   vram_tensor_data(h), vram_tensor_data(scores));
        }
        vram_tensor_free(scores);
    } else if (s == VRAM_OK && m->info.activation == VRAM_ACT_GELU_TANH) {
        s = vram_tensor_empty_like(a, VRAM_TAG_TEMPORARY, &h);
        if (s == VRAM_OK) m->rt->k->gelu_tanh(vram_tensor_numel(a), vram_tensor_data(h), vram_tensor_data(a));
    } else if (s == VRAM_OK) {
        s = vram_gelu(a, &h);
    }
    vram_tensor_free(a);
    if (s == VRAM_OK) s = lm_linear(m, h, &w[mlp ? LM_MPROJ_W : LM_APROJ_W], &w[mlp ? LM_MPROJ_B : LM_APROJ_B], &b);
    vram_tensor_free(h);
    if (s == VRAM_OK) s = vram_add(*x, b, &y);
    vram_tensor_free(b);
    vram_tensor_free(*x);
    *x = s == VRAM_OK ? y : NULL;
    return s;
}

/* The logits of x [n*T, C]: all positions, or each row's last. */
static vram_status lm_head(vram_lm *m, vram_tensor *x, int n, int64_t T, int all, vram_tensor **logits) {
    const vram_lm_weight *lnf = &m->w[m->n - 3];
    int64_t C = m->info.gpt.width, V = m->info.gpt.vocab;
    vram_tensor *last = NULL, *h = NULL, *y = NULL;
    vram_status s = VRAM_OK;
    if (!all && T > 1) {
        vram_tensor *v3 = NULL, *sl = NULL;
        s = vram_reshape(x, 3, (int64_t[]){n, T, C}, &v3);
        if (s == VRAM_OK) s = vram_slice(v3, 1, T - 1, T, 1, &sl);
        if (s == VRAM_OK) s = vram_reshape(sl, 2, (int64_t[]){n, C}, &last);
        vram_tensor_free(v3);
        vram_tensor_free(sl);
    } else {
        last = vram_tensor_retain(x);
    }
    if (s == VRAM_OK) s = vram_layer_norm(last, lnf[0].t, lnf[1].t, 1e-5, &h);
    vram_tensor_free(last);
    if (s == VRAM_OK) s = lm_linear(m, h, &lnf[2], NULL, &y);
    vram_tensor_free(h);
    if (s == VRAM_OK && all) {
        s = vram_reshape(y, 3, (int64_t[]){n, T, V}, logits);
        vram_tensor_free(y);
    } else if (s == VRAM_OK) {
        *logits = y;
    }
    return s;
}

vram_status vram_lm_forward(vram_lm *m, vram_kv_cache *c, int row0, int n, int64_t T, const int32_t *ids, int all,
                            vram_tensor **logits) {
    if (!m || !c || !ids || !logits || c->m != m) return vram_error(VRAM_ERR_INVALID_ARG, "lm forward: bad argument");
    if (row0 < 0 || n < 1 || row0 + n > c->batch || T < 1)
        return vram_error(VRAM_ERR_INVALID_ARG, "lm forward: rows [%d, %d) of a %d-row cache, %lld tokens", row0, row0 + n,
                          c->batch, (long long)T);
    for (int b = row0; b < row0 + n; b++)
        if (c->lens[b] + T > c->cap)
            return vram_error(VRAM_ERR_INVALID_ARG, "lm forward: row %d holds %lld tokens; %lld more exceed the cache's %lld "
                              "(the model's context is %d)", b, (long long)c->lens[b], (long long)T, (long long)c->cap,
                              m->info.gpt.context);
    for (int64_t i = 0; i < n * T; i++)
        if (ids[i] < 0 || ids[i] >= m->info.gpt.vocab)
            return vram_error(VRAM_ERR_INVALID_ARG, "lm forward: token %d outside the vocabulary of %d", ids[i], m->info.gpt.vocab);
    vram_no_grad_enter();
    vram_tensor *x = NULL;
    vram_status s = lm_embed(m, c, row0, n, T, ids, &x);
    for (int l = 0; l < m->info.gpt.layers && s == VRAM_OK; l++) {
        s = lm_block_half(m, c, l, row0, n, T, 0, &x);
        if (s == VRAM_OK) s = lm_block_half(m, c, l, row0, n, T, 1, &x);
    }
    if (s == VRAM_OK) s = lm_head(m, x, n, T, all, logits);
    vram_tensor_free(x);
    vram_no_grad_exit();
    if (s == VRAM_OK)
        for (int b = row0; b < row0 + n; b++) c->lens[b] += T;
    return s;
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int32_t vram_lm_sample(vram_runtime *rt, const float *logits, int64_t V, double temperature, int top_k) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (!(temperature > 0)) return (int32_t)best;
    float cut = -INFINITY;
    if (top_k > 0 && top_k < V) {
        float *sorted = malloc(sizeof *sorted * (size_t)V);
        if (!sorted) return (int32_t)best; /* no memory for the cut: the likeliest token */
        memcpy(sorted, logits, sizeof *sorted * (size_t)V);
        qsort(sorted, (size_t)V, sizeof *sorted, cmp_desc);
        cut = sorted[top_k - 1];
        free(sorted);
    }
    double sum = 0, mx = logits[best];
    for (int64_t i = 0; i < V; i++)
        if (logits[i] >= cut) sum += exp((logits[i] - mx) / temperature);
    double u = vram_runtime_uniform(rt) * sum, acc = 0;
    int64_t last = best;
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] < cut) continue;
        acc += exp((logits[i] - mx) / temperature);
        last = i;
        if (acc > u) return (int32_t)i;
    }
    return (int32_t)last;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* lg's values in host memory (host, room for them): read back from the device, which waits for
 * the forward; its first error is the status. */
static vram_status logits_to_host(vram_lm *m, vram_tensor *lg, float *host) {
    vram_tensor_read_host(lg, host);
    return vram_runtime_sync(m->rt);
}

/* The next token of row b after its whole sequence seq[0..len), recomputed from an empty cache;
 * host: room for one row of logits. */
static vram_status step_uncached(vram_lm *m, vram_kv_cache *c, int b, const int32_t *seq, int64_t len,
                                 const vram_generate_opts *o, float *host, int32_t *tok) {
    vram_tensor *lg = NULL;
    vram_kv_cache_reset(c, b);
    vram_status s = vram_lm_forward(m, c, b, 1, len, seq, 0, &lg);
    if (s == VRAM_OK) s = logits_to_host(m, lg, host);
    if (s == VRAM_OK) *tok = vram_lm_sample(m->rt, host, m->info.gpt.vocab, o->temperature, o->top_k);
    vram_tensor_free(lg);
    return s;
}

vram_status vram_lm_generate(vram_lm *m, int n, const int32_t *const *prompts, const int64_t *lens,
                             const vram_generate_opts *o, int32_t *out, vram_generate_stats *st) {
    const vram_gpt_config *g = &m->info.gpt;
    int64_t longest = 0;
    for (int b = 0; b < n; b++) {
        if (lens[b] < 1) return vram_error(VRAM_ERR_INVALID_ARG, "prompt %d is empty", b + 1);
        if (lens[b] > g->context)
            return vram_error(VRAM_ERR_INVALID_ARG, "prompt %d is %lld tokens, longer than the model's context of %d",
                              b + 1, (long long)lens[b], g->context);
        if (lens[b] + o->tokens - 1 > g->context)
            return vram_error(VRAM_ERR_INVALID_ARG, "prompt %d (%lld tokens) + %d new tokens exceed the model's "
                              "context of %d", b + 1, (long long)lens[b], o->tokens, g->context);
        if (lens[b] + o->tokens > longest) longest = lens[b] + o->tokens;
    }
    if (n < 1 || o->tokens < 1) return vram_error(VRAM_ERR_INVALID_ARG, "generate: %d prompts, %d tokens", n, o->tokens);
    int32_t *seq = calloc((size_t)n * (size_t)longest, sizeof *seq), *next = calloc((size_t)n, sizeof *next);
    float *host = malloc(sizeof *host * (size_t)n * (size_t)g->vocab); /* the logits of a step */
    vram_kv_cache *c = NULL;
    vram_status s = seq && next && host ? vram_kv_cache_new(m, n, longest - 1 > 0 ? longest - 1 : 1, &c)
                                        : vram_error(VRAM_ERR_HOST_MEMORY, "generate: out of host memory");
    vram_runtime_seed(m->rt, o->seed);
    memset(st, 0, sizeof *st);
    double t0 = now_s();
    for (int b = 0; b < n && s == VRAM_OK; b++) { /* prompts one by one: their lengths differ */
        memcpy(seq + b * longest, prompts[b], sizeof *seq * (size_t)lens[b]);
        s = step_uncached(m, c, b, seq + b * longest, lens[b], o, host, &next[b]);
    }
    double t1 = now_s();
    for (int t = 0; t < o->tokens && s == VRAM_OK; t++) {
        for (int b = 0; b < n; b++) {
            out[b * o->tokens + t] = next[b];
            seq[b * longest + lens[b] + t] = next[b];
        }
        if (t + 1 == o->tokens) break;
        if (o->no_cache) {
            for (int b = 0; b < n && s == VRAM_OK; b++)
                s = step_uncached(m, c, b, seq + b * longest, lens[b] + t + 1, o, host, &next[b]);
            continue;
        }
        vram_tensor *lg = NULL;
        s = vram_lm_forward(m, c, 0, n, 1, next, 0, &lg);
        if (s == VRAM_OK) s = logits_to_host(m, lg, host);
        for (int b = 0; b < n && s == VRAM_OK; b++)
            next[b] = vram_lm_sample(m->rt, host + (int64_t)b * g->vocab, g->vocab, o->temperature, o->top_k);
        vram_tensor_free(lg);
    }
    st->prefill_s = t1 - t0;
    st->decode_s = now_s() - t1;
    if (c) st->kv_cache_bytes = vram_kv_cache_bytes(c);
    vram_kv_cache_free(c);
    free(seq);
    free(next);
    free(host);
    return s;
}

vram_status vram_lm_nll(vram_lm *m, const uint8_t *text, uint64_t len, uint64_t max_tokens, double *nll, uint64_t *tokens) {
    int64_t ctx = m->info.gpt.context;
    if (len < 2) return vram_error(VRAM_ERR_INVALID_ARG, "nll: %llu bytes of text is too short", (unsigned long long)len);
    vram_kv_cache *c = NULL;
    vram_status s = vram_kv_cache_new(m, 1, ctx, &c);
    int32_t *ids = malloc(sizeof *ids * (size_t)ctx);
    float *host = malloc(sizeof *host * (size_t)ctx * (size_t)m->info.gpt.vocab);
    if (s == VRAM_OK && (!ids || !host)) s = vram_error(VRAM_ERR_HOST_MEMORY, "nll: out of host memory");
    double total = 0;
    uint64_t count = 0;
    for (uint64_t at = 0; s == VRAM_OK && at + 1 < len && count < max_tokens; at += (uint64_t)ctx) {
        int64_t T = (int64_t)(len - 1 - at < (uint64_t)ctx ? len - 1 - at : (uint64_t)ctx);
        for (int64_t t = 0; t < T; t++) ids[t] = text[at + (uint64_t)t];
        vram_tensor *lg = NULL;
        vram_kv_cache_reset(c, -1);
        s = vram_lm_forward(m, c, 0, 1, T, ids, 1, &lg);
        if (s == VRAM_OK) s = logits_to_host(m, lg, host);
        for (int64_t t = 0; s == VRAM_OK && t < T; t++) { /* -log softmax(logits)[next byte] */
            const float *z = host + t * m->info.gpt.vocab;
            double mx = z[0], sum = 0;
            for (int v = 1; v < m->info.gpt.vocab; v++) mx = z[v] > mx ? z[v] : mx;
            for (int v = 0; v < m->info.gpt.vocab; v++) sum += exp(z[v] - mx);
            total += log(sum) + mx - z[text[at + (uint64_t)t + 1]];
            count++;
        }
        vram_tensor_free(lg);
    }
    free(ids);
    free(host);
    vram_kv_cache_free(c);
    if (s != VRAM_OK) return s;
    *nll = total / (double)count;
    *tokens = count;
    return VRAM_OK;
}

/* nn.c — parameter lists, layers (Linear, LayerNorm, Embedding, MLP, attention, block) and
 * the GPT and conv classifier models built from them.
 *
 * A layer is a plain struct of parameter pointers; the parameter list owns one reference to
 * each parameter and the layer borrows them, so freeing a model is freeing its list. Forward
 * functions compose ops (ops.h), so autograd records them like any other ops.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "vram/nn.h"

struct vram_param_list {
    vram_tensor **items;
    char **names;
    int count, cap;
};

vram_status vram_param_list_new(vram_param_list **out) {
    *out = calloc(1, sizeof **out);
    return *out ? VRAM_OK : vram_error(VRAM_ERR_HOST_MEMORY, "param list: out of host memory");
}

void vram_param_list_free(vram_param_list *l) {
    if (!l) return;
    for (int i = 0; i < l->count; i++) {
        vram_tensor_free(l->items[i]);
        free(l->names[i]);
    }
    free(l->items);
    free(l->names);
    free(l);
}

int vram_param_list_count(const vram_param_list *l) { return l->count; }
vram_tensor *vram_param_list_get(const vram_param_list *l, int i) { return i >= 0 && i < l->count ? l->items[i] : NULL; }
const char *vram_param_list_name(const vram_param_list *l, int i) { return i >= 0 && i < l->count ? l->names[i] : NULL; }

vram_tensor *vram_param_list_find(const vram_param_list *l, const char *name) {
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->names[i], name)) return l->items[i];
    return NULL;
}

int64_t vram_param_list_numel(const vram_param_list *l) {
    int64_t n = 0;
    for (int i = 0; i < l->count; i++) n += vram_tensor_numel(l->items[i]);
    return n;
}

void vram_param_list_zero_grad(vram_param_list *l, int set_to_none) {
    for (int i = 0; i < l->count; i++) vram_tensor_zero_grad(l->items[i], set_to_none);
}

vram_status vram_param_new(vram_runtime *rt, vram_param_list *l, const char *name, int ndim, const int64_t *shape,
                           vram_tensor **out) {
    if (l->count == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        vram_tensor **items = realloc(l->items, sizeof *items * (size_t)cap);
        if (!items) return vram_error(VRAM_ERR_HOST_MEMORY, "param list: out of host memory");
        l->items = items;
        char **names = realloc(l->names, sizeof *names * (size_t)cap);
        if (!names) return vram_error(VRAM_ERR_HOST_MEMORY, "param list: out of host memory");
        l->names = names;
        l->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return vram_error(VRAM_ERR_HOST_MEMORY, "param list: out of host memory");
    vram_tensor *t = NULL;
    vram_status s = vram_tensor_new(rt, VRAM_DTYPE_F32, ndim, shape, VRAM_TAG_PARAMETER, &t);
    if (s != VRAM_OK) {
        free(copy);
        return s;
    }
    vram_tensor_set_requires_grad(t, 1);
    l->items[l->count] = t;
    l->names[l->count] = copy;
    l->count++;
    *out = t;
    return VRAM_OK;
}

/* Initialisers draw on the host (the same numbers on every device) and copy in once. */
static vram_status init_random(vram_tensor *t, double scale, int normal) {
    if (t->rt->shape_only) return VRAM_OK; /* the planner's parameters have no values */
    int64_t n = vram_tensor_numel(t);
    float *p = malloc(sizeof *p * (size_t)(n ? n : 1));
    if (!p) return vram_error(VRAM_ERR_HOST_MEMORY, "initialising a parameter: out of host memory");
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(normal ? vram_runtime_normal(t->rt) * scale : (2 * vram_runtime_uniform(t->rt) - 1) * scale);
    vram_tensor_write_host(t, p);
    free(p);
    return VRAM_OK;
}

static vram_status init_uniform(vram_tensor *t, double bound) { return init_random(t, bound, 0); }
static vram_status init_normal(vram_tensor *t, double std) { return init_random(t, std, 1); }

static const char *join(char *buf, size_t cap, const char *a, const char *b) {
    snprintf(buf, cap, "%s%s%s", a, *a ? "." : "", b);
    return buf;
}

/* ---- layers ---- */

vram_status vram_nn_linear_init(vram_nn_linear *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t in,
                                int64_t out, int bias) {
    char buf[128];
    memset(m, 0, sizeof *m);
    vram_status s = vram_param_new(rt, l, join(buf, sizeof buf, name, "weight"), 2, (int64_t[]){out, in}, &m->weight);
    if (s != VRAM_OK) return s;
    double bound = 1.0 / sqrt((double)in);
    s = init_uniform(m->weight, bound);
    if (s == VRAM_OK && bias) {
        s = vram_param_new(rt, l, join(buf, sizeof buf, name, "bias"), 1, (int64_t[]){out}, &m->bias);
        if (s == VRAM_OK) s = init_uniform(m->bias, bound);
    }
    return s;
}

vram_status vram_nn_linear_forward(const vram_nn_linear *m, vram_tensor *x, vram_tensor **y) {
    return vram_linear(x, m->weight, m->bias, y);
}

vram_status vram_nn_layer_norm_init(vram_nn_layer_norm *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t n) {
    char buf[128];
    m->eps = 1e-5;
    vram_status s = vram_param_new(rt, l, join(buf, sizeof buf, name, "weight"), 1, &n, &m->weight);
    if (s == VRAM_OK) s = vram_param_new(rt, l, join(buf, sizeof buf, name, "bias"), 1, &n, &m->bias);
    if (s == VRAM_OK) vram_tensor_fill(m->weight, 1.0);
    return s;
}

vram_status vram_nn_layer_norm_forward(const vram_nn_layer_norm *m, vram_tensor *x, vram_tensor **y) {
    return vram_layer_norm(x, m->weight, m->bias, m->eps, y);
}

vram_status vram_nn_embedding_init(vram_nn_embedding *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t num,
                                   int64_t dim) {
    char buf[128];
    vram_status s = vram_param_new(rt, l, join(buf, sizeof buf, name, "weight"), 2, (int64_t[]){num, dim}, &m->weight);
    if (s == VRAM_OK) s = init_normal(m->weight, 1.0);
    return s;
}

vram_status vram_nn_embedding_forward(const vram_nn_embedding *m, vram_tensor *ids, vram_tensor **y) {
    return vram_embedding(m->weight, ids, y);
}

vram_status vram_nn_mlp_init(vram_nn_mlp *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t width,
                             double dropout) {
    char buf[128];
    m->dropout = dropout;
    m->activation = VRAM_ACT_GELU_ERF;
    vram_status s = vram_nn_linear_init(&m->fc, rt, l, join(buf, sizeof buf, name, "c_fc"), width, 4 * width, 1);
    if (s == VRAM_OK) s = vram_nn_linear_init(&m->proj, rt, l, join(buf, sizeof buf, name, "c_proj"), 4 * width, width, 1);
    return s;
}

/* The MLP after its first projection: h = fc(x) -> proj(gelu(h)) (+ dropout). */
static vram_status mlp_from_hidden(const vram_nn_mlp *m, vram_tensor *h, int training, int keep_gelu, vram_tensor **y) {
    vram_tensor *p = NULL, *a = NULL;
    int tanh_ = m->activation == VRAM_ACT_GELU_TANH;
    /* gelu + projection as one op, so the 4x-wide GELU output is not kept for backward */
    vram_status s = keep_gelu ? (tanh_ ? vram_gelu_tanh(h, &a) : vram_gelu(h, &a))
                              : (tanh_ ? vram_gelu_tanh_linear : vram_gelu_linear)(h, m->proj.weight, m->proj.bias, &p);
    if (keep_gelu && s == VRAM_OK) s = vram_linear(a, m->proj.weight, m->proj.bias, &p);
    vram_tensor_free(a);
    if (s == VRAM_OK && training && m->dropout > 0) {
        s = vram_dropout(p, m->dropout, training, y);
        vram_tensor_free(p);
    } else if (s == VRAM_OK) {
        *y = p;
    }
    return s;
}

vram_status vram_nn_mlp_forward(const vram_nn_mlp *m, vram_tensor *x, int training, vram_tensor **y) {
    vram_tensor *h = NULL;
    vram_status s = vram_nn_linear_forward(&m->fc, x, &h);
    if (s == VRAM_OK) s = mlp_from_hidden(m, h, training, 0, y);
    vram_tensor_free(h);
    return s;
}

vram_status vram_nn_attention_init(vram_nn_attention *m, vram_runtime *rt, vram_param_list *l, const char *name,
                                   int64_t width, int64_t heads, double dropout) {
    char buf[128];
    if (heads <= 0 || width % heads)
        return vram_error(VRAM_ERR_INVALID_ARG, "attention: width %lld is not a multiple of %lld heads", (long long)width,
                          (long long)heads);
    m->heads = heads;
    m->width = width;
    m->dropout = dropout;
    vram_status s = vram_nn_linear_init(&m->c_attn, rt, l, join(buf, sizeof buf, name, "c_attn"), width, 3 * width, 1);
    if (s == VRAM_OK) s = vram_nn_linear_init(&m->c_proj, rt, l, join(buf, sizeof buf, name, "c_proj"), width, width, 1);
    return s;
}

/* Attention after its input projection: qkv [B, T, 3C] -> [B, T, C]. Takes qkv's reference. */
static vram_status attention_from_qkv(const vram_nn_attention *m, vram_tensor *qkv, int training, vram_tensor **y) {
    vram_tensor *merged = NULL, *proj = NULL;
    /* one op from the packed projection to the merged heads (ops_attention.c) */
    vram_status s = vram_causal_attention_qkv(qkv, m->heads, &merged);
    vram_tensor_free(qkv);
    if (s == VRAM_OK) s = vram_nn_linear_forward(&m->c_proj, merged, &proj);
    vram_tensor_free(merged);
    if (s == VRAM_OK && training && m->dropout > 0) {
        s = vram_dropout(proj, m->dropout, training, y);
        vram_tensor_free(proj);
    } else if (s == VRAM_OK) {
        *y = proj;
    }
    return s;
}

vram_status vram_nn_attention_forward(const vram_nn_attention *m, vram_tensor *x, int training, vram_tensor **y) {
    char sx[96];
    if (x->ndim != 3 || x->shape[2] != m->width)
        return vram_error(VRAM_ERR_SHAPE, "attention: input %s must be [B, T, %lld]", SHAPE_STR(x, sx), (long long)m->width);
    vram_tensor *qkv = NULL;
    vram_status s = vram_nn_linear_forward(&m->c_attn, x, &qkv);
    if (s == VRAM_OK) s = attention_from_qkv(m, qkv, training, y);
    return s;
}

vram_status vram_nn_block_init(vram_nn_block *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t width,
                               int64_t heads, double dropout) {
    char buf[128];
    vram_status s = vram_nn_layer_norm_init(&m->ln1, rt, l, join(buf, sizeof buf, name, "ln_1"), width);
    if (s == VRAM_OK) s = vram_nn_attention_init(&m->attn, rt, l, join(buf, sizeof buf, name, "attn"), width, heads, dropout);
    if (s == VRAM_OK) s = vram_nn_layer_norm_init(&m->ln2, rt, l, join(buf, sizeof buf, name, "ln_2"), width);
    if (s == VRAM_OK) s = vram_nn_mlp_init(&m->mlp, rt, l, join(buf, sizeof buf, name, "mlp"), width, dropout);
    return s;
}

/* linear(layer_norm(x)): one op that recomputes the normalised x in backward, or two that keep
 * it; the normalised x in dt (x's, or 16-bit from an f32 residual stream). */
static vram_status norm_then_linear(const vram_nn_layer_norm *ln, const vram_nn_linear *lin, int keep, vram_tensor *x,
                                    vram_dtype dt, vram_tensor **y) {
    if (!keep) return vram_layer_norm_linear_to(x, ln->weight, ln->bias, ln->eps, lin->weight, lin->bias, dt, y);
    vram_tensor *a = NULL;
    vram_status s = vram_layer_norm_to(x, ln->weight, ln->bias, ln->eps, dt, &a);
    if (s == VRAM_OK) s = vram_nn_linear_forward(lin, a, y);
    vram_tensor_free(a);
    return s;
}

/* The block on x, or on x + branch when branch is not NULL (the previous block's MLP output,
 * not yet added: that residual add runs with ln_1 as one op; takes branch). With d_out, the
 * block's own MLP output is left unadded in *d_out (for the next block's ln_1) and *y is the
 * stream before it; else *y is their sum. Each layer norm is fused with the projection after
 * it (layer_norm_linear), so the normalised activations are recomputed in backward instead of
 * kept (unless the model's configuration keeps them: VRAM_GPT_KEEP_LAYERNORM), and each
 * residual add with the layer norm after it. */
static vram_status block_forward(vram_nn_block *m, vram_tensor *x, vram_tensor *branch, int training, vram_tensor **y,
                                 vram_tensor **d_out) {
    char sx[96];
    if (x->ndim != 3 || x->shape[2] != m->attn.width) {
        vram_tensor_free(branch);
        return vram_error(VRAM_ERR_SHAPE, "block: input %s must be [B, T, %lld]", SHAPE_STR(x, sx), (long long)m->attn.width);
    }
    vram_tensor *xin = NULL, *qkv = NULL, *b = NULL, *h = NULL, *c = NULL, *d = NULL;
    int keep_ln = (m->keep & VRAM_GPT_KEEP_LAYERNORM) != 0;
    /* an f32 residual stream under mixed precision: the products in m->lowp, the adds in f32 */
    vram_dtype dt = vram_dtype_is_lowp((vram_dtype)m->lowp) ? (vram_dtype)m->lowp : x->dtype;
    vram_status s;
    if (branch) { /* (only without keep_ln: the caller's rule) */
        s = vram_add_layer_norm_linear_to(x, branch, m->ln1.weight, m->ln1.bias, m->ln1.eps, m->attn.c_attn.weight,
                                          m->attn.c_attn.bias, dt, &xin, &qkv);
    } else {
        xin = vram_tensor_retain(x);
        s = norm_then_linear(&m->ln1, &m->attn.c_attn, keep_ln, x, dt, &qkv);
    }
    if (s == VRAM_OK) s = attention_from_qkv(&m->attn, qkv, training, &b);
    if (s == VRAM_OK && !keep_ln) { /* the residual add and ln_2 in one kernel where the device has it */
        s = vram_add_layer_norm_linear_to(xin, b, m->ln2.weight, m->ln2.bias, m->ln2.eps, m->mlp.fc.weight,
                                          m->mlp.fc.bias, dt, &h, &c);
        b = NULL; /* (taken) */
    } else if (s == VRAM_OK) {
        s = vram_add(xin, b, &h);
    }
    vram_tensor_free(b);
    if (s == VRAM_OK && keep_ln) s = norm_then_linear(&m->ln2, &m->mlp.fc, keep_ln, h, dt, &c);
    if (s == VRAM_OK) s = mlp_from_hidden(&m->mlp, c, training, (m->keep & VRAM_GPT_KEEP_GELU) != 0, &d);
    vram_tensor_free(c);
    if (s == VRAM_OK && d_out) {
        *y = h, *d_out = d;
        h = d = NULL;
    } else if (s == VRAM_OK) {
        s = vram_add(h, d, y);
    }
    vram_tensor_free(h);
    vram_tensor_free(d);
    vram_tensor_free(xin);
    return s;
}

vram_status vram_nn_block_forward(vram_nn_block *m, vram_tensor *x, int training, vram_tensor **y) {
    return block_forward(m, x, NULL, training, y, NULL);
}

static vram_status block_ckpt_fn(void *ctx, int n, vram_tensor *const *in, vram_tensor **out) {
    (void)n;
    vram_nn_block *m = ctx;
    return vram_nn_block_forward(m, in[0], m->training, out);
}

/* ---- GPT ---- */

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* GPT-2's initialisation over the parameter list (see nn.h); layer norms keep weight 1, bias 0. */
static vram_status gpt2_init(vram_param_list *l, const vram_gpt_config *cfg) {
    vram_status s = VRAM_OK;
    for (int i = 0; i < l->count && s == VRAM_OK; i++) {
        vram_tensor *t = l->items[i];
        const char *name = l->names[i];
        if (t->ndim == 2 && ends_with(name, "weight")) {
            double std = cfg->init_std;
            if (ends_with(name, "c_proj.weight")) std /= sqrt(2.0 * cfg->layers);
            s = init_normal(t, std);
        } else if (ends_with(name, "bias")) {
            s = vram_tensor_fill(t, 0.0);
        }
    }
    return s;
}

struct vram_gpt {
    vram_runtime *rt;
    vram_gpt_config cfg;
    vram_param_list *params;
    vram_nn_embedding wte, wpe;
    vram_nn_block *blocks;
    vram_nn_layer_norm ln_f;
    vram_nn_linear lm_head;
    int checkpoint;
};

vram_status vram_gpt_new(vram_runtime *rt, const vram_gpt_config *cfg, vram_gpt **out) {
    if (!rt || !cfg || !out) return vram_error(VRAM_ERR_INVALID_ARG, "gpt: null argument");
    if (cfg->layers < 1 || cfg->heads < 1 || cfg->width < 1 || cfg->vocab < 1 || cfg->context < 1)
        return vram_error(VRAM_ERR_INVALID_ARG, "gpt: layers, heads, width, vocab and context must be positive");
    if (cfg->width % cfg->heads)
        return vram_error(VRAM_ERR_INVALID_ARG, "gpt: width %d is not a multiple of %d heads", cfg->width, cfg->heads);
    if (!(cfg->dropout >= 0 && cfg->dropout < 1)) return vram_error(VRAM_ERR_INVALID_ARG, "gpt: dropout %g", cfg->dropout);
    vram_gpt *g = calloc(1, sizeof *g);
    if (!g) return vram_error(VRAM_ERR_HOST_MEMORY, "gpt: out of host memory");
    g->rt = rt;
    g->cfg = *cfg;
    g->blocks = calloc((size_t)cfg->layers, sizeof *g->blocks);
    vram_status s = g->blocks ? vram_param_list_new(&g->params) : vram_error(VRAM_ERR_HOST_MEMORY, "gpt: out of host memory");
    if (s == VRAM_OK) s = vram_nn_embedding_init(&g->wte, rt, g->params, "wte", cfg->vocab, cfg->width);
    if (s == VRAM_OK) s = vram_nn_embedding_init(&g->wpe, rt, g->params, "wpe", cfg->context, cfg->width);
    for (int i = 0; i < cfg->layers && s == VRAM_OK; i++) {
        char name[32];
        snprintf(name, sizeof name, "h.%d", i);
        s = vram_nn_block_init(&g->blocks[i], rt, g->params, name, cfg->width, cfg->heads, cfg->dropout);
        vram_nn_mlp *mlp = &g->blocks[i].mlp;
        mlp->activation = cfg->activation;
        /* the MLP's first product computes the tanh GELU too, where the device can (ops_mixed.c) */
        if (s == VRAM_OK) mlp->fc.weight->st->gelu_epilogue = cfg->activation == VRAM_ACT_GELU_TANH;
    }
    if (s == VRAM_OK) s = vram_nn_layer_norm_init(&g->ln_f, rt, g->params, "ln_f", cfg->width);
    if (s == VRAM_OK && cfg->tied) {
        g->lm_head.weight = g->wte.weight; /* borrowed: the list holds it once, as wte.weight */
        g->lm_head.bias = NULL;
    } else if (s == VRAM_OK) {
        s = vram_nn_linear_init(&g->lm_head, rt, g->params, "lm_head", cfg->width, cfg->vocab, 0);
    }
    if (s == VRAM_OK && cfg->init_std > 0) s = gpt2_init(g->params, cfg);
    if (s == VRAM_OK && cfg->keep_lowp_weights && (cfg->precision == VRAM_DTYPE_BF16 || cfg->precision == VRAM_DTYPE_F16))
        for (int i = 0; i < vram_param_list_count(g->params); i++) vram_param_list_get(g->params, i)->st->keep_lowp = 1;
    if (s != VRAM_OK) {
        vram_gpt_free(g);
        return s;
    }
    *out = g;
    return VRAM_OK;
}

void vram_gpt_free(vram_gpt *g) {
    if (!g) return;
    vram_param_list_free(g->params);
    free(g->blocks);
    free(g);
}

vram_param_list *vram_gpt_params(vram_gpt *g) { return g->params; }
const vram_gpt_config *vram_gpt_get_config(const vram_gpt *g) { return &g->cfg; }
void vram_gpt_set_checkpoint(vram_gpt *g, int on) { g->checkpoint = on != 0; }

vram_status vram_gpt_forward(vram_gpt *g, vram_tensor *ids, vram_tensor *targets, int training, vram_tensor **logits_out,
                             vram_tensor **loss_out) {
    char si[96];
    if (!g || !ids) return vram_error(VRAM_ERR_INVALID_ARG, "gpt forward: null argument");
    if (ids->ndim != 2 || ids->shape[1] > g->cfg.context || ids->shape[1] < 1)
        return vram_error(VRAM_ERR_SHAPE, "gpt forward: ids %s must be [B, T] with 1 <= T <= context %d", SHAPE_STR(ids, si),
                          g->cfg.context);
    if (loss_out && !targets) return vram_error(VRAM_ERR_INVALID_ARG, "gpt forward: a loss needs targets");
    int64_t T = ids->shape[1];
    vram_tensor *pos = NULL, *tok = NULL, *pe = NULL, *x = NULL, *tmp = NULL, *logits = NULL, *branch = NULL;
    vram_status s = vram_tensor_empty(g->rt, VRAM_DTYPE_I32, 1, &T, VRAM_TAG_TEMPORARY, &pos);
    if (s == VRAM_OK) {
        int32_t *p = malloc(sizeof *p * (size_t)T);
        if (p) {
            for (int64_t t = 0; t < T; t++) p[t] = (int32_t)t;
            vram_tensor_write_host(pos, p);
            free(p);
        } else {
            s = vram_error(VRAM_ERR_HOST_MEMORY, "gpt forward: out of host memory");
        }
    }
    if (s == VRAM_OK) s = vram_nn_embedding_forward(&g->wte, ids, &tok);
    if (s == VRAM_OK) s = vram_nn_embedding_forward(&g->wpe, pos, &pe);
    vram_tensor_free(pos);
    if (s == VRAM_OK) s = vram_add(tok, pe, &x);
    vram_tensor_free(tok);
    vram_tensor_free(pe);
    if (s == VRAM_OK && training && g->cfg.dropout > 0) {
        s = vram_dropout(x, g->cfg.dropout, training, &tmp);
        vram_tensor_free(x);
        x = tmp;
    }
    int mixed = g->cfg.precision == VRAM_DTYPE_BF16 || g->cfg.precision == VRAM_DTYPE_F16;
    if (s == VRAM_OK && mixed && !g->cfg.residual_f32) {
        s = vram_to_dtype(x, g->cfg.precision, &tmp); /* mixed precision from here to the loss */
        vram_tensor_free(x);
        x = tmp;
    }
    for (int i = 0; i < g->cfg.layers && s == VRAM_OK; i++) {
        vram_nn_block *b = &g->blocks[i];
        b->training = training;
        b->keep = g->cfg.keep;
        b->lowp = mixed && g->cfg.residual_f32 ? g->cfg.precision : 0; /* (else the stream's own dtype) */
        tmp = NULL;
        /* Between blocks (not checkpointed, layer norms recomputed, recording: the sums are kept
         * by the graph either way), a block's MLP output is handed to the next block unadded,
         * whose ln_1 adds it in the same kernel; the allocator sees the same requests. */
        int hand_on = !g->checkpoint && !(g->cfg.keep & VRAM_GPT_KEEP_LAYERNORM) && vram_grad_enabled() &&
                      i + 1 < g->cfg.layers;
        vram_tensor *next = NULL;
        if (g->checkpoint) {
            s = vram_checkpoint(g->rt, block_ckpt_fn, b, 1, &x, &tmp);
        } else {
            s = block_forward(b, x, branch, training, &tmp, hand_on ? &next : NULL);
        }
        branch = next; /* (the previous one taken) */
        vram_tensor_free(x);
        x = tmp;
    }
    vram_tensor_free(branch); /* (NULL but after a failure) */
    tmp = NULL; /* (x holds the last block's output; a failure must not free it twice) */
    if (s == VRAM_OK) /* (16-bit for the classifier under mixed precision, from either stream) */
        s = vram_layer_norm_to(x, g->ln_f.weight, g->ln_f.bias, g->ln_f.eps, mixed ? g->cfg.precision : x->dtype, &tmp);
    vram_tensor_free(x);
    if (s == VRAM_OK && loss_out && !logits_out && !g->lm_head.bias) { /* the head and the loss as one op */
        s = vram_linear_cross_entropy(tmp, g->lm_head.weight, targets, loss_out);
        vram_tensor_free(tmp);
        return s;
    }
    if (s == VRAM_OK) s = vram_nn_linear_forward(&g->lm_head, tmp, &logits);
    vram_tensor_free(tmp);
    if (s == VRAM_OK && loss_out) s = vram_cross_entropy(logits, targets, loss_out);
    if (s == VRAM_OK && logits_out) {
        *logits_out = logits;
    } else {
        vram_tensor_free(logits);
    }
    return s;
}

/* ---- conv classifier ---- */

struct vram_convnet {
    vram_runtime *rt;
    vram_param_list *params;
    vram_tensor *w1, *b1, *w2, *b2;
    vram_nn_linear fc;
    int64_t flat;
};

vram_status vram_convnet_new(vram_runtime *rt, int cin, int h, int w, int classes, vram_convnet **out) {
    if (cin < 1 || h < 4 || w < 4 || h % 4 || w % 4 || classes < 1)
        return vram_error(VRAM_ERR_INVALID_ARG, "convnet: %d channels, %dx%d (multiples of 4), %d classes", cin, h, w, classes);
    vram_convnet *c = calloc(1, sizeof *c);
    if (!c) return vram_error(VRAM_ERR_HOST_MEMORY, "convnet: out of host memory");
    c->rt = rt;
    vram_status s = vram_param_list_new(&c->params);
    if (s == VRAM_OK) s = vram_param_new(rt, c->params, "conv1.weight", 4, (int64_t[]){8, cin, 3, 3}, &c->w1);
    if (s == VRAM_OK) s = vram_param_new(rt, c->params, "conv1.bias", 1, (int64_t[]){8}, &c->b1);
    if (s == VRAM_OK) s = vram_param_new(rt, c->params, "conv2.weight", 4, (int64_t[]){16, 8, 3, 3}, &c->w2);
    if (s == VRAM_OK) s = vram_param_new(rt, c->params, "conv2.bias", 1, (int64_t[]){16}, &c->b2);
    if (s == VRAM_OK) {
        double b1 = 1.0 / sqrt(cin * 9.0), b2 = 1.0 / sqrt(8 * 9.0);
        s = init_uniform(c->w1, b1);
        if (s == VRAM_OK) s = init_uniform(c->b1, b1);
        if (s == VRAM_OK) s = init_uniform(c->w2, b2);
        if (s == VRAM_OK) s = init_uniform(c->b2, b2);
        c->flat = 16LL * (h / 4) * (w / 4);
        if (s == VRAM_OK) s = vram_nn_linear_init(&c->fc, rt, c->params, "fc", c->flat, classes, 1);
    }
    if (s != VRAM_OK) {
        vram_convnet_free(c);
        return s;
    }
    *out = c;
    return VRAM_OK;
}

void vram_convnet_free(vram_convnet *c) {
    if (!c) return;
    vram_param_list_free(c->params);
    free(c);
}

vram_param_list *vram_convnet_params(vram_convnet *c) { return c->params; }

vram_status vram_convnet_forward(vram_convnet *c, vram_tensor *x, vram_tensor **logits) {
    vram_tensor *a = NULL, *b = NULL, *p = NULL, *flat = NULL;
    vram_status s = vram_conv2d(x, c->w1, c->b1, 1, 1, &a);
    if (s == VRAM_OK) s = vram_relu(a, &b);
    vram_tensor_free(a);
    if (s == VRAM_OK) s = vram_max_pool2d(b, 2, 2, &p);
    vram_tensor_free(b);
    if (s == VRAM_OK) s = vram_conv2d(p, c->w2, c->b2, 1, 1, &a);
    vram_tensor_free(p);
    if (s == VRAM_OK) s = vram_relu(a, &b);
    vram_tensor_free(a);
    if (s == VRAM_OK) s = vram_max_pool2d(b, 2, 2, &p);
    vram_tensor_free(b);
    if (s == VRAM_OK) s = vram_reshape(p, 2, (int64_t[]){x->shape[0], c->flat}, &flat);
    vram_tensor_free(p);
    if (s == VRAM_OK) s = vram_nn_linear_forward(&c->fc, flat, logits);
    vram_tensor_free(flat);
    return s;
}

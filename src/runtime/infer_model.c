/* infer_model.c — the inference model's weights (infer.h): loading from a .vram or safetensors
 * file or from a training GPT, quantizing to Q8_0, Q8_R or bf16 in place, saving.
 *
 * The weights are a flat array in the training GPT's parameter order and names (nn.h), each a
 * logical [rows, cols] matrix (a vector is one row) with its storage format and tensor: an f32
 * [rows, cols] tensor, or for bf16 and INT8 a u8 view of the format's bytes (model_file.h) in
 * one arena block.
 * Only 2-D parameters (embeddings, projections, output head) are ever converted. A safetensors
 * GPT-2 without lm_head.weight ties the head to wte: the head holds wte's tensor (m->tied).
 *
 * Q8_0 quantization of a block of 32 weights: scale d = max|w| / 127 rounded to f16, q =
 * round(w / d) clamped to [-127, 127], as llama.cpp's Q8_0 (8.5 bits a weight). Q8_R does the
 * same over a whole row (an output channel) with an f32 scale: 8 + 32 / cols bits a weight.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype_conv.h"
#include "infer_internal.h"
#include "vram/safetensors.h"

/* The GPT's parameters in nn.h's order: fills names, rows, cols; returns the count. */
static int layout(const vram_gpt_config *c, char (*names)[64], int64_t *rows, int64_t *cols) {
    int n = 0;
#define ADD(r, k, ...) (snprintf(names[n], 64, __VA_ARGS__), rows[n] = (r), cols[n] = (k), n++)
    int64_t C = c->width;
    ADD(c->vocab, C, "wte.weight");
    ADD(c->context, C, "wpe.weight");
    for (int l = 0; l < c->layers; l++) {
        ADD(1, C, "h.%d.ln_1.weight", l);
        ADD(1, C, "h.%d.ln_1.bias", l);
        ADD(3 * C, C, "h.%d.attn.c_attn.weight", l);
        ADD(1, 3 * C, "h.%d.attn.c_attn.bias", l);
        ADD(C, C, "h.%d.attn.c_proj.weight", l);
        ADD(1, C, "h.%d.attn.c_proj.bias", l);
        ADD(1, C, "h.%d.ln_2.weight", l);
        ADD(1, C, "h.%d.ln_2.bias", l);
        ADD(4 * C, C, "h.%d.mlp.c_fc.weight", l);
        ADD(1, 4 * C, "h.%d.mlp.c_fc.bias", l);
        ADD(C, 4 * C, "h.%d.mlp.c_proj.weight", l);
        ADD(1, C, "h.%d.mlp.c_proj.bias", l);
    }
    ADD(1, C, "ln_f.weight");
    ADD(1, C, "ln_f.bias");
    ADD(c->vocab, C, "lm_head.weight");
#undef ADD
    return n;
}

static vram_status lm_alloc(vram_runtime *rt, const vram_model_info *info, vram_lm **out) {
    vram_lm *m = calloc(1, sizeof *m);
    int n = 2 + 12 * info->gpt.layers + 3;
    if (m) m->w = calloc((size_t)n, sizeof *m->w);
    char(*names)[64] = calloc((size_t)n, 64);
    int64_t *rows = calloc((size_t)n, sizeof *rows), *cols = calloc((size_t)n, sizeof *cols);
    vram_status s = VRAM_OK;
    if (!m || !m->w || !names || !rows || !cols) {
        s = vram_error(VRAM_ERR_HOST_MEMORY, "model: out of host memory");
    } else {
        m->rt = rt;
        m->info = *info;
        m->n = layout(&info->gpt, names, rows, cols);
        for (int i = 0; i < m->n; i++) {
            memcpy(m->w[i].name, names[i], 64);
            m->w[i].rows = rows[i];
            m->w[i].cols = cols[i];
            m->w[i].fmt = VRAM_WFMT_F32;
        }
    }
    free(names), free(rows), free(cols);
    if (s != VRAM_OK) {
        vram_lm_free(m);
        return s;
    }
    *out = m;
    return VRAM_OK;
}

void vram_lm_free(vram_lm *m) {
    if (!m) return;
    for (int i = 0; m->w && i < m->n; i++) vram_tensor_free(m->w[i].t);
    vram_tensor_free(m->arena);
    free(m->w);
    free(m);
}

const vram_model_info *vram_lm_info(const vram_lm *m) { return &m->info; }
vram_runtime *vram_lm_runtime(const vram_lm *m) { return m->rt; }

vram_wfmt vram_lm_format(const vram_lm *m) {
    for (int i = 0; i < m->n; i++)
        if (m->w[i].fmt != VRAM_WFMT_F32) return m->w[i].fmt;
    return VRAM_WFMT_F32;
}

/* Whether weight i is the tied head (wte's tensor again: held, converted and counted once). */
static int is_tied_head(const vram_lm *m, int i) { return m->tied && i == m->n - 1; }

/* Points the tied head at wte's tensor and format (after wte was loaded or converted). */
static void tie_head(vram_lm *m) {
    if (!m->tied) return;
    vram_lm_weight *head = &m->w[m->n - 1];
    vram_tensor_free(head->t);
    head->t = vram_tensor_retain(m->w[LM_WTE].t);
    head->fmt = m->w[LM_WTE].fmt;
}

uint64_t vram_lm_weight_bytes(const vram_lm *m) {
    uint64_t b = 0;
    for (int i = 0; i < m->n; i++)
        if (!is_tied_head(m, i)) b += vram_wfmt_bytes(m->w[i].fmt, m->w[i].rows, m->w[i].cols);
    return b;
}

uint64_t vram_lm_f32_bytes(const vram_lm *m) {
    uint64_t b = 0;
    for (int i = 0; i < m->n; i++)
        if (!is_tied_head(m, i)) b += vram_wfmt_bytes(VRAM_WFMT_F32, m->w[i].rows, m->w[i].cols);
    return b;
}

#define ARENA_ALIGN 64

/* Reserves the block the converted weights will be views into: `bytes` as arena_bytes sums. */
static vram_status arena_reserve(vram_lm *m, uint64_t bytes) {
    if (m->arena || !bytes) return VRAM_OK;
    int64_t n = (int64_t)bytes;
    m->arena_used = 0;
    return vram_tensor_empty(m->rt, VRAM_DTYPE_U8, 1, &n, VRAM_TAG_PARAMETER, &m->arena);
}

static uint64_t arena_round(uint64_t b) { return (b + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

/* A tensor for weight w in format fmt: f32 [rows, cols] (or [cols]) of its own; bf16 and INT8,
 * u8 bytes from the arena while it has room, else a block of their own. */
static vram_status weight_tensor(vram_lm *m, const vram_lm_weight *w, vram_wfmt fmt, vram_tensor **out) {
    if (fmt == VRAM_WFMT_F32) {
        int64_t shape[2] = {w->rows, w->cols};
        return w->rows == 1 ? vram_tensor_new(m->rt, VRAM_DTYPE_F32, 1, &shape[1], VRAM_TAG_PARAMETER, out)
                            : vram_tensor_new(m->rt, VRAM_DTYPE_F32, 2, shape, VRAM_TAG_PARAMETER, out);
    }
    int64_t bytes = (int64_t)vram_wfmt_bytes(fmt, w->rows, w->cols), one = 1;
    if (m->arena && m->arena_used + (uint64_t)bytes <= (uint64_t)vram_tensor_numel(m->arena)) {
        *out = vram_tensor_view_new(m->arena, 1, &bytes, &one, (int64_t)m->arena_used);
        if (!*out) return vram_error(VRAM_ERR_HOST_MEMORY, "model: out of host memory");
        m->arena_used += arena_round((uint64_t)bytes);
        return VRAM_OK;
    }
    return vram_tensor_new(m->rt, VRAM_DTYPE_U8, 1, &bytes, VRAM_TAG_PARAMETER, out);
}

/* The arena size for converting every matrix of m to fmt. */
static uint64_t arena_bytes(const vram_lm *m, vram_wfmt fmt) {
    uint64_t b = 0;
    for (int i = 0; i < m->n; i++)
        if (m->w[i].rows > 1 && !is_tied_head(m, i) && !(fmt == VRAM_WFMT_Q8_0 && m->w[i].cols % 32))
            b += arena_round(vram_wfmt_bytes(fmt, m->w[i].rows, m->w[i].cols));
    return b;
}

static void quantize_q8_0(const float *w, int64_t rows, int64_t cols, uint8_t *out) {
    int8_t *q = (int8_t *)out;
    uint16_t *sc = (uint16_t *)(out + rows * cols); /* rows*cols is a multiple of 32: 2-byte aligned */
    for (int64_t b = 0; b < rows * cols / 32; b++) {
        const float *x = w + b * 32;
        float amax = 0;
        for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(x[k]));
        uint16_t h = vram_f32_to_f16(amax / 127.0f);
        float d = vram_f16_to_f32(h);
        for (int k = 0; k < 32; k++) {
            float v = d > 0 ? roundf(x[k] / d) : 0;
            q[b * 32 + k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        sc[b] = h;
    }
}

/* Converts weight w (f32) to fmt in place; vectors, and under Q8_0 rows not a multiple of 32
 * long, stay f32 (*kept counts the latter). */
static void quantize_q8_r(const float *w, int64_t rows, int64_t cols, uint8_t *out) {
    int8_t *q = (int8_t *)out;
    uint8_t *sc = out + rows * cols; /* rows*cols need not be a multiple of 4: written unaligned */
    for (int64_t r = 0; r < rows; r++) {
        const float *x = w + r * cols;
        float amax = 0;
        for (int64_t k = 0; k < cols; k++) amax = fmaxf(amax, fabsf(x[k]));
        float d = amax / 127.0f;
        for (int64_t k = 0; k < cols; k++) {
            float v = d > 0 ? roundf(x[k] / d) : 0;
            q[r * cols + k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        memcpy(sc + 4 * r, &d, 4);
    }
}

static vram_status quantize_one(vram_lm *m, vram_lm_weight *w, vram_wfmt fmt, int *kept) {
    if (w->rows == 1 || w->fmt != VRAM_WFMT_F32 || is_tied_head(m, (int)(w - m->w))) return VRAM_OK;
    if (fmt == VRAM_WFMT_Q8_0 && w->cols % 32) {
        (*kept)++;
        return VRAM_OK;
    }
    vram_tensor *t = NULL;
    vram_status s = weight_tensor(m, w, fmt, &t);
    if (s != VRAM_OK) return s;
    const float *src = vram_tensor_data(w->t);
    uint8_t *dst = vram_tensor_data(t);
    if (fmt == VRAM_WFMT_Q8_0) {
        quantize_q8_0(src, w->rows, w->cols, dst);
    } else if (fmt == VRAM_WFMT_Q8_R) {
        quantize_q8_r(src, w->rows, w->cols, dst);
    } else {
        for (int64_t j = 0; j < w->rows * w->cols; j++) ((uint16_t *)dst)[j] = vram_f32_to_bf16(src[j]);
    }
    vram_tensor_free(w->t);
    w->t = t;
    w->fmt = fmt;
    return VRAM_OK;
}

static vram_status check_target(const vram_lm *m, vram_wfmt fmt) {
    if (fmt != VRAM_WFMT_Q8_0 && fmt != VRAM_WFMT_Q8_R && fmt != VRAM_WFMT_BF16)
        return vram_error(VRAM_ERR_INVALID_ARG, "quantize: format %s is not a quantized format", vram_wfmt_name(fmt));
    if (vram_lm_format(m) != VRAM_WFMT_F32)
        return vram_error(VRAM_ERR_STATE, "quantize: the model is already %s; quantize an f32 model",
                          vram_wfmt_name(vram_lm_format(m)));
    return VRAM_OK;
}

/* Entry of weight w in f, checked against the shape the header implies; -1 after an error. */
static int find_entry(vram_model_file *f, const char *path, const vram_lm_weight *w, vram_model_entry *e) {
    int k = vram_model_file_find(f, w->name, VRAM_MF_ROLE_PARAM);
    if (k < 0) {
        vram_error(VRAM_ERR_PARSE, "model '%s' has no tensor '%s' (another architecture or shape?)", path, w->name);
        return -1;
    }
    vram_model_file_entry(f, k, e);
    int64_t er = e->ndim == 1 ? 1 : e->shape[0], ec = e->shape[e->ndim - 1];
    if (e->ndim > 2 || er != w->rows || ec != w->cols || (w->rows == 1 && e->fmt != VRAM_WFMT_F32)) {
        vram_error(VRAM_ERR_PARSE, "model '%s': tensor '%s' is %s [%lld, %lld], the header's shape needs [%lld, %lld]", path,
                   w->name, vram_wfmt_name(e->fmt), (long long)er, (long long)ec, (long long)w->rows, (long long)w->cols);
        return -1;
    }
    return k;
}

/* Every entry is checked, and the arena sized, before any weight is allocated. */
static vram_status load_vram(vram_runtime *rt, const char *path, vram_wfmt want, int *kept, vram_lm **out, uint64_t *bytes_read) {
    vram_model_file *f = NULL;
    vram_lm *m = NULL;
    vram_model_entry e;
    vram_status s = vram_model_file_open(path, &f);
    if (s == VRAM_OK) s = vram_model_info_check(vram_model_file_info(f), path);
    if (s == VRAM_OK) s = lm_alloc(rt, vram_model_file_info(f), &m);
    uint64_t stored = 0; /* bytes of the file's bf16 and INT8 tensors */
    vram_wfmt stored_fmt = VRAM_WFMT_F32;
    for (int i = 0; m && i < m->n && s == VRAM_OK; i++) {
        if (find_entry(f, path, &m->w[i], &e) < 0) s = VRAM_ERR_PARSE;
        else if (e.fmt != VRAM_WFMT_F32) stored += arena_round(e.nbytes), stored_fmt = e.fmt;
    }
    if (s == VRAM_OK && stored && want != VRAM_WFMT_F32)
        s = vram_error(VRAM_ERR_STATE, "quantize: the model is already %s; quantize an f32 model", vram_wfmt_name(stored_fmt));
    if (s == VRAM_OK) s = arena_reserve(m, stored ? stored : want != VRAM_WFMT_F32 ? arena_bytes(m, want) : 0);
    for (int i = 0; m && i < m->n && s == VRAM_OK; i++) {
        vram_lm_weight *w = &m->w[i];
        int k = find_entry(f, path, w, &e);
        w->fmt = e.fmt;
        s = weight_tensor(m, w, e.fmt, &w->t);
        if (s == VRAM_OK) s = vram_model_file_read(f, k, vram_tensor_data(w->t), e.nbytes);
        if (s == VRAM_OK && want != VRAM_WFMT_F32) s = quantize_one(m, w, want, kept);
    }
    if (s == VRAM_OK && bytes_read) *bytes_read = vram_model_file_bytes_read(f);
    vram_model_file_close(f);
    if (s != VRAM_OK) {
        vram_lm_free(m);
        return s;
    }
    m->info.flags &= ~(uint32_t)VRAM_MF_TRAINING;
    *out = m;
    return VRAM_OK;
}

static vram_status load_safetensors(vram_runtime *rt, const char *path, vram_wfmt want, int *kept, vram_lm **out,
                                    uint64_t *bytes_read) {
    vram_safetensors *st = NULL;
    vram_lm *m = NULL;
    vram_model_info info;
    vram_status s = vram_safetensors_open(path, &st);
    if (s == VRAM_OK) s = vram_safetensors_gpt_info(st, &info);
    if (s == VRAM_OK) s = vram_model_info_check(&info, path);
    if (s == VRAM_OK) s = lm_alloc(rt, &info, &m);
    if (s == VRAM_OK) m->tied = vram_safetensors_tied(st);
    /* every tensor checked before any is allocated: the shape comes from the file */
    for (int i = 0; m && i < m->n && s == VRAM_OK; i++) s = vram_safetensors_read_gpt(st, m->w[i].name, m->w[i].rows, m->w[i].cols, NULL);
    if (s == VRAM_OK && want != VRAM_WFMT_F32) s = arena_reserve(m, arena_bytes(m, want));
    for (int i = 0; m && i < m->n && s == VRAM_OK; i++) {
        vram_lm_weight *w = &m->w[i];
        if (is_tied_head(m, i)) {
            tie_head(m);
            continue;
        }
        s = weight_tensor(m, w, VRAM_WFMT_F32, &w->t);
        if (s == VRAM_OK) s = vram_safetensors_read_gpt(st, w->name, w->rows, w->cols, vram_tensor_data(w->t));
        if (s == VRAM_OK && want != VRAM_WFMT_F32) s = quantize_one(m, w, want, kept);
    }
    if (s == VRAM_OK && bytes_read) *bytes_read = vram_safetensors_bytes_read(st);
    vram_safetensors_close(st);
    if (s != VRAM_OK) {
        vram_lm_free(m);
        return s;
    }
    *out = m;
    return VRAM_OK;
}

vram_status vram_lm_load_as(vram_runtime *rt, const char *path, vram_wfmt want, vram_lm **out, uint64_t *bytes_read,
                            int *kept) {
    if (!rt || !path || !out) return vram_error(VRAM_ERR_INVALID_ARG, "model load: null argument");
    if (want != VRAM_WFMT_F32 && want != VRAM_WFMT_Q8_0 && want != VRAM_WFMT_Q8_R && want != VRAM_WFMT_BF16)
        return vram_error(VRAM_ERR_INVALID_ARG, "model load: no weight format %d", (int)want);
    FILE *fp = fopen(path, "rb");
    if (!fp) return vram_error(VRAM_ERR_NOT_FOUND, "model '%s': cannot open", path);
    char magic[8] = {0};
    size_t got = fread(magic, 1, 8, fp);
    fclose(fp);
    int k = 0;
    vram_status s;
    /* a safetensors file starts with its header's length, a small number: its high bytes are 0 */
    if (got == 8 && !memcmp(magic, "VRAMMODL", 8)) s = load_vram(rt, path, want, &k, out, bytes_read);
    else if (got == 8 && magic[7] == 0 && magic[6] == 0 && magic[5] == 0) s = load_safetensors(rt, path, want, &k, out, bytes_read);
    else return vram_error(VRAM_ERR_PARSE, "'%s' is neither a vram model file nor safetensors", path);
    if (s == VRAM_OK && want != VRAM_WFMT_F32) (*out)->info.flags |= VRAM_MF_QUANTIZED;
    if (s == VRAM_OK && kept) *kept = k;
    return s;
}

vram_status vram_lm_load(vram_runtime *rt, const char *path, vram_lm **out, uint64_t *bytes_read) {
    return vram_lm_load_as(rt, path, VRAM_WFMT_F32, out, bytes_read, NULL);
}

vram_status vram_lm_from_gpt(vram_gpt *g, vram_lm **out) {
    vram_param_list *pl = vram_gpt_params(g);
    vram_runtime *rt = vram_tensor_runtime(vram_param_list_get(pl, 0));
    vram_model_info info;
    vram_model_info_from_gpt(&info, vram_gpt_get_config(g));
    vram_lm *m = NULL;
    vram_status s = lm_alloc(rt, &info, &m);
    for (int i = 0; s == VRAM_OK && i < m->n; i++) {
        vram_tensor *p = vram_param_list_find(pl, m->w[i].name);
        if (!p || vram_tensor_numel(p) != m->w[i].rows * m->w[i].cols) {
            s = vram_error(VRAM_ERR_INTERNAL, "model from gpt: parameter '%s' missing or misshapen", m->w[i].name);
            break;
        }
        s = weight_tensor(m, &m->w[i], VRAM_WFMT_F32, &m->w[i].t);
        if (s == VRAM_OK) memcpy(vram_tensor_data(m->w[i].t), vram_tensor_data(p), (size_t)vram_tensor_numel(p) * 4);
    }
    if (s != VRAM_OK) {
        vram_lm_free(m);
        return s;
    }
    *out = m;
    return VRAM_OK;
}

vram_status vram_lm_copy_to(const vram_lm *src, vram_runtime *rt, vram_lm **out, uint64_t *bytes) {
    if (!src || !rt || !out) return vram_error(VRAM_ERR_INVALID_ARG, "model copy: null argument");
    if (src->rt->on_gpu) return vram_error(VRAM_ERR_UNSUPPORTED, "model copy: the source must be a host model");
    vram_lm *m = NULL;
    vram_status s = lm_alloc(rt, &src->info, &m);
    uint64_t arena = 0, total = 0;
    for (int i = 0; s == VRAM_OK && i < src->n; i++)
        if (src->w[i].fmt != VRAM_WFMT_F32 && !is_tied_head(src, i))
            arena += arena_round(vram_wfmt_bytes(src->w[i].fmt, src->w[i].rows, src->w[i].cols));
    if (s == VRAM_OK) s = arena_reserve(m, arena);
    if (s == VRAM_OK) m->tied = src->tied;
    for (int i = 0; s == VRAM_OK && i < m->n; i++) {
        const vram_lm_weight *w = &src->w[i];
        if (is_tied_head(m, i)) {
            tie_head(m);
            continue;
        }
        size_t nb = (size_t)vram_wfmt_bytes(w->fmt, w->rows, w->cols);
        m->w[i].fmt = w->fmt;
        s = weight_tensor(m, &m->w[i], w->fmt, &m->w[i].t);
        if (s == VRAM_OK) rt->k->upload(vram_tensor_data(m->w[i].t), vram_tensor_data(w->t), nb);
        total += nb;
    }
    if (s == VRAM_OK) s = vram_runtime_sync(rt);
    if (s != VRAM_OK) {
        vram_lm_free(m);
        return s;
    }
    if (bytes) *bytes = total;
    *out = m;
    return VRAM_OK;
}

vram_status vram_lm_quantize(vram_lm *m, vram_wfmt fmt, int *kept) {
    vram_status s = check_target(m, fmt);
    if (s == VRAM_OK) s = arena_reserve(m, arena_bytes(m, fmt));
    int k = 0;
    for (int i = 0; i < m->n && s == VRAM_OK; i++) s = quantize_one(m, &m->w[i], fmt, &k);
    tie_head(m);
    if (s != VRAM_OK) return s;
    m->info.flags |= VRAM_MF_QUANTIZED;
    if (kept) *kept = k;
    return VRAM_OK;
}

vram_status vram_lm_save(const vram_lm *m, const char *path) {
    vram_model_info info = m->info;
    info.flags &= ~(uint32_t)VRAM_MF_TRAINING;
    if (vram_lm_format(m) != VRAM_WFMT_F32) info.flags |= VRAM_MF_QUANTIZED;
    vram_model_writer *wr = NULL;
    vram_status s = vram_model_writer_open(path, &info, &wr);
    for (int i = 0; i < m->n && s == VRAM_OK; i++) {
        const vram_lm_weight *w = &m->w[i];
        int64_t shape[2] = {w->rows, w->cols};
        s = vram_model_writer_add(wr, w->name, VRAM_MF_ROLE_PARAM, w->fmt, w->rows == 1 ? 1 : 2, w->rows == 1 ? &shape[1] : shape,
                                  0, vram_tensor_data(w->t), vram_wfmt_bytes(w->fmt, w->rows, w->cols));
    }
    if (!wr) return s;
    vram_status c = vram_model_writer_close(wr, s == VRAM_OK);
    return s != VRAM_OK ? s : c;
}

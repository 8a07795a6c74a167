/* safetensors.c — GPT-2 weights as safetensors (safetensors.h).
 *
 * Reading maps the file and parses the JSON header with a small recursive-descent parser that
 * knows the format's shape: an object whose values are tensor objects ({"dtype", "shape",
 * "data_offsets"}) or, under "__metadata__", strings. Every tensor's range is checked against
 * the data section and against its dtype and shape before anything is read. Names are
 * PyTorch's, with or without the "transformer." prefix (GPT2LMHeadModel's and GPT2Model's state
 * dicts). Conv1D weights are stored [in, out] and transposed into nn.h's [out, in] on the way in
 * and out.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype_conv.h"
#include "rt_internal.h"
#include "vram/safetensors.h"

enum { ST_F32, ST_F16, ST_BF16, ST_OTHER };
enum { ST_MAX_DIMS = 8, ST_MAX_TENSORS = 1 << 16 };

typedef struct st_tensor {
    char *name;
    int dtype, ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;
} st_tensor;

struct vram_safetensors {
    char *path;
    const uint8_t *map, *data;
    uint64_t size, data_size, bytes_read;
    st_tensor *t;
    int n, cap;
    char n_head[32], activation[32];
    const char *prefix; /* "transformer." or "" */
};

/* ---- the header's JSON ---- */

typedef struct jp {
    const char *p, *end;
    vram_safetensors *st;
} jp;

static void ws(jp *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static int lit(jp *j, char c) {
    ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

/* A string into buf (cap bytes, truncated past it; escapes other than \" \\ \/ are kept raw). */
static int str(jp *j, char *buf, size_t cap) {
    if (!lit(j, '"')) return 0;
    size_t n = 0;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c == '\\' && j->p < j->end) c = *j->p++;
        if (n + 1 < cap) buf[n++] = c;
    }
    if (cap) buf[n] = '\0';
    return j->p < j->end && *j->p++ == '"';
}

static int json_uint(jp *j, uint64_t *v) {
    ws(j);
    const char *start = j->p;
    *v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (*v > (UINT64_MAX - 9) / 10) return 0;
        *v = *v * 10 + (uint64_t)(*j->p++ - '0');
    }
    return j->p > start;
}

static int uint_list(jp *j, uint64_t *v, int max, int *n) {
    *n = 0;
    if (!lit(j, '[')) return 0;
    if (lit(j, ']')) return 1;
    do {
        if (*n >= max || !json_uint(j, &v[*n])) return 0;
        (*n)++;
    } while (lit(j, ','));
    return lit(j, ']');
}

static int tensor_obj(jp *j, st_tensor *t) {
    char key[32], dt[16] = "";
    uint64_t dims[ST_MAX_DIMS], offs[2];
    int got_shape = 0, got_offs = 0, nd = 0, no = 0;
    if (!lit(j, '{')) return 0;
    if (!lit(j, '}')) do {
            if (!str(j, key, sizeof key) || !lit(j, ':')) return 0;
            if (!strcmp(key, "dtype")) {
                if (!str(j, dt, sizeof dt)) return 0;
            } else if (!strcmp(key, "shape")) {
                if (!uint_list(j, dims, ST_MAX_DIMS, &nd)) return 0;
                got_shape = 1;
            } else if (!strcmp(key, "data_offsets")) {
                if (!uint_list(j, offs, 2, &no) || no != 2) return 0;
                got_offs = 1;
            } else {
                return 0;
            }
        } while (lit(j, ','));
    if (!lit(j, '}') || !got_shape || !got_offs || !dt[0]) return 0;
    t->dtype = !strcmp(dt, "F32") ? ST_F32 : !strcmp(dt, "F16") ? ST_F16 : !strcmp(dt, "BF16") ? ST_BF16 : ST_OTHER;
    t->ndim = nd;
    for (int i = 0; i < nd; i++) {
        if (dims[i] > ((uint64_t)1 << 40)) return 0;
        t->shape[i] = (int64_t)dims[i];
    }
    t->begin = offs[0];
    t->end = offs[1];
    return 1;
}

static int metadata(jp *j) {
    char key[64], val[32];
    if (!lit(j, '{')) return 0;
    if (lit(j, '}')) return 1;
    do {
        if (!str(j, key, sizeof key) || !lit(j, ':') || !str(j, val, sizeof val)) return 0;
        if (!strcmp(key, "n_head")) snprintf(j->st->n_head, sizeof j->st->n_head, "%s", val);
        if (!strcmp(key, "activation")) snprintf(j->st->activation, sizeof j->st->activation, "%s", val);
    } while (lit(j, ','));
    return lit(j, '}');
}

static vram_status parse_header(vram_safetensors *st, const char *text, uint64_t len) {
    jp j = {text, text + len, st};
    char name[256];
    if (!lit(&j, '{')) return vram_error(VRAM_ERR_PARSE, "safetensors '%s': the header is not a JSON object", st->path);
    if (!lit(&j, '}')) do {
            if (!str(&j, name, sizeof name) || !lit(&j, ':'))
                return vram_error(VRAM_ERR_PARSE, "safetensors '%s': bad JSON at header byte %td", st->path, j.p - text);
            if (!strcmp(name, "__metadata__")) {
                if (!metadata(&j)) return vram_error(VRAM_ERR_PARSE, "safetensors '%s': bad __metadata__", st->path);
                continue;
            }
            if (st->n == st->cap) {
                int cap = st->cap ? 2 * st->cap : 64;
                st_tensor *t = cap <= ST_MAX_TENSORS ? realloc(st->t, sizeof *t * (size_t)cap) : NULL;
                if (!t) return vram_error(VRAM_ERR_OUT_OF_MEMORY, "safetensors '%s': too many tensors", st->path);
                st->t = t;
                st->cap = cap;
            }
            st_tensor *t = &st->t[st->n];
            memset(t, 0, sizeof *t);
            if (!tensor_obj(&j, t))
                return vram_error(VRAM_ERR_PARSE, "safetensors '%s': tensor '%s': bad entry at header byte %td", st->path,
                                  name, j.p - text);
            if (!(t->name = strdup(name))) return vram_error(VRAM_ERR_HOST_MEMORY, "safetensors: out of host memory");
            st->n++;
        } while (lit(&j, ','));
    if (!lit(&j, '}')) return vram_error(VRAM_ERR_PARSE, "safetensors '%s': bad JSON at header byte %td", st->path, j.p - text);
    for (int i = 0; i < st->n; i++) {
        st_tensor *t = &st->t[i];
        uint64_t numel = 1, es = t->dtype == ST_F32 ? 4 : 2;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        if (t->end < t->begin || t->end > st->data_size || (t->dtype != ST_OTHER && t->end - t->begin != numel * es))
            return vram_error(VRAM_ERR_PARSE, "safetensors '%s': tensor '%s': data_offsets [%llu, %llu] do not fit its shape or "
                              "the file's %llu data bytes", st->path, t->name, (unsigned long long)t->begin,
                              (unsigned long long)t->end, (unsigned long long)st->data_size);
    }
    return VRAM_OK;
}

vram_status vram_safetensors_open(const char *path, vram_safetensors **out) {
    vram_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return vram_error(VRAM_ERR_HOST_MEMORY, "safetensors: out of host memory");
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    vram_status s = VRAM_OK;
    if (fd < 0) s = vram_error(errno == ENOENT ? VRAM_ERR_NOT_FOUND : VRAM_ERR_IO, "safetensors '%s': %s", path, strerror(errno));
    else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) s = vram_error(VRAM_ERR_IO, "safetensors '%s': not a regular file", path);
    else if ((uint64_t)sb.st_size < 10) s = vram_error(VRAM_ERR_PARSE, "safetensors '%s': %lld bytes is too short", path, (long long)sb.st_size);
    if (s == VRAM_OK) {
        st->size = (uint64_t)sb.st_size;
        void *p = mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) s = vram_error(VRAM_ERR_IO, "safetensors '%s': mmap failed: %s", path, strerror(errno));
        else st->map = p;
    }
    if (fd >= 0) close(fd);
    if (s == VRAM_OK) {
        uint64_t hl = 0;
        for (int i = 0; i < 8; i++) hl |= (uint64_t)st->map[i] << (8 * i);
        if (hl < 2 || hl > st->size - 8 || hl > (100u << 20))
            s = vram_error(VRAM_ERR_PARSE, "safetensors '%s': header length %llu does not fit the file's %llu bytes (truncated "
                           "or not safetensors)", path, (unsigned long long)hl, (unsigned long long)st->size);
        else {
            st->data = st->map + 8 + hl;
            st->data_size = st->size - 8 - hl;
            s = parse_header(st, (const char *)st->map + 8, hl);
        }
    }
    if (s != VRAM_OK) {
        vram_safetensors_close(st);
        return s;
    }
    *out = st;
    return VRAM_OK;
}

void vram_safetensors_close(vram_safetensors *st) {
    if (!st) return;
    if (st->map) munmap((void *)st->map, st->size);
    for (int i = 0; i < st->n; i++) free(st->t[i].name);
    free(st->t);
    free(st->path);
    free(st);
}

uint64_t vram_safetensors_bytes_read(const vram_safetensors *st) { return st->bytes_read; }

static st_tensor *find(vram_safetensors *st, const char *prefix, const char *name) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->t[i].name, full)) return &st->t[i];
    return NULL;
}

static const char *const block_names[] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
                                          "attn.bias", "attn.masked_bias"};

/* The layer of a block tensor name ("h.N.<known>", after the prefix), or -1 for another name. */
static int block_layer(const char *n) {
    if (strncmp(n, "h.", 2)) return -1;
    char *end;
    long l = strtol(n + 2, &end, 10);
    if (end == n + 2 || *end != '.' || l < 0 || l > 100000) return -1;
    for (size_t i = 0; i < sizeof block_names / sizeof *block_names; i++)
        if (!strcmp(end + 1, block_names[i])) return (int)l;
    return -1;
}

vram_status vram_safetensors_gpt_info(vram_safetensors *st, vram_model_info *info) {
    st->prefix = find(st, "transformer.", "wte.weight") ? "transformer." : "";
    st_tensor *wte = find(st, st->prefix, "wte.weight"), *wpe = find(st, st->prefix, "wpe.weight");
    if (!wte || !wpe || wte->ndim != 2 || wpe->ndim != 2 || wte->shape[1] != wpe->shape[1])
        return vram_error(VRAM_ERR_UNSUPPORTED, "safetensors '%s' is not a GPT-2 model (no [vocab, width] wte.weight and "
                          "[context, width] wpe.weight)", st->path);
    size_t pl = strlen(st->prefix);
    int layers = 0;
    for (int i = 0; i < st->n; i++) {
        const char *n = st->t[i].name;
        int l = strncmp(n, st->prefix, pl) ? -1 : block_layer(n + pl);
        if (l >= 0) {
            layers = l + 1 > layers ? l + 1 : layers;
            continue;
        }
        static const char *const top[] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
        int known = !strcmp(n, "lm_head.weight");
        for (size_t k = 0; k < 4 && !known; k++) known = !strncmp(n, st->prefix, pl) && !strcmp(n + pl, top[k]);
        if (!known)
            return vram_error(VRAM_ERR_UNSUPPORTED, "safetensors '%s': tensor '%s' is not part of a GPT-2 (another "
                              "architecture?)", st->path, n);
    }
    memset(info, 0, sizeof *info);
    snprintf(info->arch, sizeof info->arch, "gpt2");
    info->gpt.layers = layers;
    info->gpt.vocab = (int)wte->shape[0];
    info->gpt.width = (int)wte->shape[1];
    info->gpt.context = (int)wpe->shape[0];
    char *end = NULL;
    long heads = st->n_head[0] ? strtol(st->n_head, &end, 10) : (wte->shape[1] % 64 ? 0 : wte->shape[1] / 64);
    if (heads < 1 || (end && *end) || wte->shape[1] % heads)
        return vram_error(VRAM_ERR_PARSE, "safetensors '%s': no usable head count (__metadata__ n_head '%s', width %lld)",
                          st->path, st->n_head, (long long)wte->shape[1]);
    info->gpt.heads = (int)heads;
    info->activation = info->gpt.activation = !strcmp(st->activation, "gelu_erf") ? VRAM_ACT_GELU_ERF : VRAM_ACT_GELU_TANH;
    if (layers < 1) return vram_error(VRAM_ERR_PARSE, "safetensors '%s': no transformer blocks (h.0...)", st->path);
    return VRAM_OK;
}

static int is_conv1d(const char *name) {
    static const char *const c[] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"};
    size_t n = strlen(name);
    for (int i = 0; i < 4; i++) {
        size_t k = strlen(c[i]);
        if (n > k && !strcmp(name + n - k, c[i])) return 1;
    }
    return 0;
}

static float load_elem(const st_tensor *t, const uint8_t *p, uint64_t i) {
    if (t->dtype == ST_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return t->dtype == ST_F16 ? vram_f16_to_f32(h) : vram_bf16_to_f32(h);
}

int vram_safetensors_tied(vram_safetensors *st) { return find(st, "", "lm_head.weight") == NULL; }

vram_status vram_safetensors_read_gpt(vram_safetensors *st, const char *name, int64_t rows, int64_t cols, float *dst) {
    if (!st->prefix) return vram_error(VRAM_ERR_STATE, "safetensors: read before gpt_info");
    st_tensor *t = !strcmp(name, "lm_head.weight") ? find(st, "", name) : find(st, st->prefix, name);
    if (!t && !strcmp(name, "lm_head.weight")) t = find(st, st->prefix, "wte.weight"); /* tied */
    if (!t) return vram_error(VRAM_ERR_PARSE, "safetensors '%s' has no tensor '%s%s'", st->path, st->prefix, name);
    int conv = is_conv1d(name);
    int64_t want0 = conv ? cols : rows, want1 = conv ? rows : cols;
    int ok = t->dtype != ST_OTHER && ((rows == 1 && t->ndim == 1 && t->shape[0] == cols) ||
                                      (t->ndim == 2 && t->shape[0] == want0 && t->shape[1] == want1));
    if (!ok) {
        char b[96];
        return vram_error(VRAM_ERR_PARSE, "safetensors '%s': tensor '%s' is %s; a GPT-2 of this shape needs [%lld, %lld] in "
                          "F32, F16 or BF16", st->path, t->name, vram_shape_str(t->ndim, t->shape, b, sizeof b),
                          (long long)want0, (long long)want1);
    }
    if (!dst) return VRAM_OK; /* a check only */
    const uint8_t *p = st->data + t->begin;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[r * cols + c] = load_elem(t, p, conv ? (uint64_t)(c * rows + r) : (uint64_t)(r * cols + c));
    st->bytes_read += t->end - t->begin;
    return VRAM_OK;
}

/* ---- writing ---- */

static vram_status write_all(FILE *fp, const void *p, size_t n, const char *path) {
    if (n && fwrite(p, 1, n, fp) != n) return vram_error(VRAM_ERR_IO, "safetensors '%s': write failed: %s", path, strerror(errno));
    return VRAM_OK;
}

vram_status vram_safetensors_save_gpt(const char *path, vram_gpt *g) {
    vram_param_list *pl = vram_gpt_params(g);
    int n = vram_param_list_count(pl);
    vram_tensor *wte = vram_param_list_find(pl, "wte.weight"), *head = vram_param_list_find(pl, "lm_head.weight");
    int tied = wte && head && !memcmp(vram_tensor_data(wte), vram_tensor_data(head), (size_t)vram_tensor_numel(wte) * 4);
    size_t cap = 256 + (size_t)n * 192, len = 0;
    char *hdr = malloc(cap);
    if (!hdr) return vram_error(VRAM_ERR_HOST_MEMORY, "safetensors: out of host memory");
    len += (size_t)snprintf(hdr + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\",\"n_head\":\"%d\",\"activation\":\"%s\"}",
                            vram_gpt_get_config(g)->heads,
                            vram_gpt_get_config(g)->activation == VRAM_ACT_GELU_TANH ? "gelu_tanh" : "gelu_erf");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        vram_tensor *t = vram_param_list_get(pl, i);
        const char *name = vram_param_list_name(pl, i);
        if (tied && t == head) continue;
        int conv = is_conv1d(name);
        uint64_t bytes = (uint64_t)vram_tensor_numel(t) * 4;
        char shape[64];
        if (t->ndim == 2) snprintf(shape, sizeof shape, "%lld,%lld", (long long)t->shape[conv], (long long)t->shape[!conv]);
        else snprintf(shape, sizeof shape, "%lld", (long long)t->shape[0]);
        len += (size_t)snprintf(hdr + len, cap - len, ",\"%s%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}",
                                t == head ? "" : "transformer.", name, shape, (unsigned long long)off,
                                (unsigned long long)(off + bytes));
        off += bytes;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8) hdr[len++] = ' '; /* the data starts 8-byte aligned; the spec allows trailing spaces */
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(hdr);
        return vram_error(VRAM_ERR_IO, "safetensors '%s': cannot create: %s", path, strerror(errno));
    }
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)((uint64_t)len >> (8 * i));
    vram_status s = write_all(fp, lenb, 8, path);
    if (s == VRAM_OK) s = write_all(fp, hdr, len, path);
    free(hdr);
    for (int i = 0; i < n && s == VRAM_OK; i++) {
        vram_tensor *t = vram_param_list_get(pl, i);
        if (tied && t == head) continue;
        const float *src = vram_tensor_data(t);
        if (!is_conv1d(vram_param_list_name(pl, i))) {
            s = write_all(fp, src, (size_t)vram_tensor_numel(t) * 4, path);
            continue;
        }
        int64_t out = t->shape[0], in = t->shape[1];
        float *tr = malloc(sizeof *tr * (size_t)(out * in));
        if (!tr) s = vram_error(VRAM_ERR_HOST_MEMORY, "safetensors: out of host memory");
        for (int64_t r = 0; tr && r < in; r++)
            for (int64_t c = 0; c < out; c++) tr[r * out + c] = src[c * in + r];
        if (tr) s = write_all(fp, tr, sizeof *tr * (size_t)(out * in), path);
        free(tr);
    }
    if (fclose(fp) != 0 && s == VRAM_OK) s = vram_error(VRAM_ERR_IO, "safetensors '%s': close failed: %s", path, strerror(errno));
    if (s != VRAM_OK) remove(path);
    return s;
}

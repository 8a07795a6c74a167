/* model_file.c — the .vram model file (model_file.h; layout in docs/model-format.md).
 *
 * A file is a 256-byte header, the tensors' data (each at a 64-byte-aligned offset), then the
 * directory (160 bytes an entry). Every integer is little-endian and written byte by byte, so
 * the layout does not depend on the host's struct padding. The header and the directory each
 * carry a checksum; each tensor's checksum is in its directory entry. The writer streams the
 * data to path.tmp, appends the directory, writes the header last and renames, so a crash never
 * leaves a half-written file under the real name.
 *
 * The reader maps the whole file and validates all of it but the tensor bytes up front; a
 * tensor's bytes are checked (size re-read with fstat, checksum after the copy) when read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vram/model_file.h"

#define HEADER_BYTES 256
#define ENTRY_BYTES 160
#define NAME_BYTES 80
#define DATA_ALIGN 64
static const char MAGIC[8] = {'V', 'R', 'A', 'M', 'M', 'O', 'D', 'L'};

const char *vram_wfmt_name(vram_wfmt f) {
    switch (f) {
    case VRAM_WFMT_F32: return "f32";
    case VRAM_WFMT_BF16: return "bf16";
    case VRAM_WFMT_Q8_0: return "q8_0";
    case VRAM_WFMT_Q8_R: return "q8_r";
    }
    return "?";
}

uint64_t vram_wfmt_bytes(vram_wfmt f, int64_t rows, int64_t cols) {
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
    switch (f) {
    case VRAM_WFMT_F32: return 4 * n;
    case VRAM_WFMT_BF16: return 2 * n;
    case VRAM_WFMT_Q8_0: return n + 2 * (n / 32);
    case VRAM_WFMT_Q8_R: return n + 4 * (uint64_t)rows;
    }
    return 0;
}

/* A 64-bit checksum: FNV-1a's multiply-xor over little-endian 64-bit words (the tail zero-padded),
 * eight times faster than byte-wise FNV-1a and as sensitive to a flipped bit. */
static uint64_t checksum(const void *data, uint64_t n) {
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h ^ n;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_f64(uint8_t *p, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    put_u64(p, u);
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static double get_f64(const uint8_t *p) {
    uint64_t u = get_u64(p);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

static void header_encode(uint8_t *h, const vram_model_info *in, uint32_t n_tensors, uint64_t dir_offset,
                          uint64_t file_size, uint64_t dir_sum) {
    memset(h, 0, HEADER_BYTES);
    memcpy(h, MAGIC, 8);
    put_u32(h + 8, VRAM_MODEL_FILE_VERSION);
    put_u32(h + 12, HEADER_BYTES);
    put_u32(h + 16, in->flags);
    put_u32(h + 20, n_tensors);
    memcpy(h + 24, in->arch, strnlen(in->arch, 15));
    const int32_t shape[6] = {in->gpt.layers, in->gpt.heads, in->gpt.width, in->gpt.vocab, in->gpt.context, in->activation};
    for (int i = 0; i < 6; i++) put_u32(h + 40 + 4 * i, (uint32_t)shape[i]);
    put_f64(h + 64, in->gpt.dropout);
    put_u64(h + 72, in->step);
    for (int i = 0; i < 4; i++) put_u64(h + 80 + 8 * i, in->rng[i]);
    put_u64(h + 112, in->data_bytes);
    put_u32(h + 120, (uint32_t)in->optim.kind);
    const double od[7] = {in->optim.lr,    in->optim.momentum, in->optim.weight_decay, in->optim.beta1,
                          in->optim.beta2, in->optim.eps,      in->optim.lr_decay};
    for (int i = 0; i < 7; i++) put_f64(h + 128 + 8 * i, od[i]);
    put_u64(h + 184, dir_offset);
    put_u64(h + 192, file_size);
    put_u64(h + 200, dir_sum);
    put_u64(h + 248, checksum(h, 248));
}

static void header_decode(const uint8_t *h, vram_model_info *out) {
    memset(out, 0, sizeof *out);
    out->flags = get_u32(h + 16);
    memcpy(out->arch, h + 24, 15);
    int32_t v[6];
    for (int i = 0; i < 6; i++) v[i] = (int32_t)get_u32(h + 40 + 4 * i);
    out->gpt = (vram_gpt_config){.layers = v[0], .heads = v[1], .width = v[2], .vocab = v[3], .context = v[4]};
    out->activation = out->gpt.activation = v[5];
    out->gpt.dropout = get_f64(h + 64);
    out->step = get_u64(h + 72);
    for (int i = 0; i < 4; i++) out->rng[i] = get_u64(h + 80 + 8 * i);
    out->data_bytes = get_u64(h + 112);
    out->optim.kind = (vram_optim_kind)get_u32(h + 120);
    double *od[7] = {&out->optim.lr,    &out->optim.momentum, &out->optim.weight_decay, &out->optim.beta1,
                     &out->optim.beta2, &out->optim.eps,      &out->optim.lr_decay};
    for (int i = 0; i < 7; i++) *od[i] = get_f64(h + 128 + 8 * i);
}

/* ---------------------------------------------------------------------------------------- */
/* Writing.                                                                                  */

struct vram_model_writer {
    FILE *fp;
    char *path, *tmp;
    vram_model_info info;
    uint8_t *dir;
    uint32_t n, cap;
    uint64_t pos;
    int failed;
};

vram_status vram_model_writer_open(const char *path, const vram_model_info *info, vram_model_writer **out) {
    if (!path || !info || !out) return vram_error(VRAM_ERR_INVALID_ARG, "model file: null argument");
    vram_model_writer *w = calloc(1, sizeof *w);
    size_t len = strlen(path);
    if (w) w->path = strdup(path), w->tmp = malloc(len + 5);
    if (!w || !w->path || !w->tmp) {
        if (w) free(w->path), free(w->tmp);
        free(w);
        return vram_error(VRAM_ERR_HOST_MEMORY, "model file: out of host memory");
    }
    snprintf(w->tmp, len + 5, "%s.tmp", path);
    w->fp = fopen(w->tmp, "wb");
    if (!w->fp) {
        vram_status s = vram_error(VRAM_ERR_IO, "model file '%s': cannot create: %s", w->tmp, strerror(errno));
        free(w->path), free(w->tmp), free(w);
        return s;
    }
    w->info = *info;
    uint8_t zero[HEADER_BYTES] = {0}; /* the header is written last, over this */
    if (fwrite(zero, 1, HEADER_BYTES, w->fp) != HEADER_BYTES) w->failed = 1;
    w->pos = HEADER_BYTES;
    *out = w;
    return VRAM_OK;
}

vram_status vram_model_writer_add(vram_model_writer *w, const char *name, int role, vram_wfmt fmt, int ndim,
                                  const int64_t *shape, int64_t step, const void *data, uint64_t nbytes) {
    if (strlen(name) >= NAME_BYTES || ndim < 1 || ndim > 4)
        return vram_error(VRAM_ERR_INVALID_ARG, "model file: tensor '%s' (%d dims) cannot be stored", name, ndim);
    if (w->n == w->cap) {
        uint32_t cap = w->cap ? 2 * w->cap : 64;
        uint8_t *d = realloc(w->dir, (size_t)cap * ENTRY_BYTES);
        if (!d) return vram_error(VRAM_ERR_HOST_MEMORY, "model file: out of host memory");
        w->dir = d;
        w->cap = cap;
    }
    static const uint8_t pad[DATA_ALIGN] = {0};
    uint64_t aligned = (w->pos + DATA_ALIGN - 1) / DATA_ALIGN * DATA_ALIGN;
    if (aligned > w->pos && fwrite(pad, 1, aligned - w->pos, w->fp) != aligned - w->pos) w->failed = 1;
    if (nbytes && fwrite(data, 1, nbytes, w->fp) != nbytes) w->failed = 1;
    if (w->failed) return vram_error(VRAM_ERR_IO, "model file '%s': write failed: %s", w->tmp, strerror(errno));
    uint8_t *e = w->dir + (size_t)w->n * ENTRY_BYTES;
    memset(e, 0, ENTRY_BYTES);
    memcpy(e, name, strlen(name));
    put_u32(e + 80, (uint32_t)fmt);
    put_u32(e + 84, (uint32_t)role);
    put_u32(e + 88, (uint32_t)ndim);
    for (int i = 0; i < ndim; i++) put_u64(e + 96 + 8 * i, (uint64_t)shape[i]);
    put_u64(e + 128, aligned);
    put_u64(e + 136, nbytes);
    put_u64(e + 144, (uint64_t)step);
    put_u64(e + 152, checksum(data, nbytes));
    w->pos = aligned + nbytes;
    w->n++;
    return VRAM_OK;
}

vram_status vram_model_writer_close(vram_model_writer *w, int commit) {
    if (!w) return VRAM_OK;
    vram_status s = VRAM_OK;
    if (commit && !w->failed) {
        uint64_t dir_bytes = (uint64_t)w->n * ENTRY_BYTES;
        uint8_t h[HEADER_BYTES];
        header_encode(h, &w->info, w->n, w->pos, w->pos + dir_bytes, checksum(w->dir, dir_bytes));
        if ((dir_bytes && fwrite(w->dir, 1, dir_bytes, w->fp) != dir_bytes) || fseek(w->fp, 0, SEEK_SET) != 0 ||
            fwrite(h, 1, HEADER_BYTES, w->fp) != HEADER_BYTES || fflush(w->fp) != 0)
            s = vram_error(VRAM_ERR_IO, "model file '%s': write failed: %s", w->tmp, strerror(errno));
    } else if (commit) {
        s = vram_error(VRAM_ERR_IO, "model file '%s': an earlier write failed", w->tmp);
    }
    if (fclose(w->fp) != 0 && s == VRAM_OK && commit)
        s = vram_error(VRAM_ERR_IO, "model file '%s': close failed: %s", w->tmp, strerror(errno));
    if (commit && s == VRAM_OK && rename(w->tmp, w->path) != 0)
        s = vram_error(VRAM_ERR_IO, "model file: cannot rename '%s' to '%s': %s", w->tmp, w->path, strerror(errno));
    if (!commit || s != VRAM_OK) remove(w->tmp);
    free(w->dir);
    free(w->path);
    free(w->tmp);
    free(w);
    return s;
}

/* ---------------------------------------------------------------------------------------- */
/* Reading.                                                                                  */

struct vram_model_file {
    int fd;
    const uint8_t *map;
    uint64_t size;
    char *path;
    vram_model_info info;
    uint32_t n;
    vram_model_entry *entries;
    uint64_t *offsets, *sums;
    char (*names)[NAME_BYTES];
    uint64_t bytes_read;
};

/* Checks entry i of the directory and decodes it. */
static vram_status entry_decode(vram_model_file *f, uint32_t i, const uint8_t *e, uint64_t dir_offset) {
    vram_model_entry *out = &f->entries[i];
    if (!memchr(e, 0, NAME_BYTES)) return vram_error(VRAM_ERR_PARSE, "model file '%s': entry %u: name not terminated", f->path, i);
    memcpy(f->names[i], e, NAME_BYTES);
    out->name = f->names[i];
    out->fmt = (vram_wfmt)get_u32(e + 80);
    out->role = (int)get_u32(e + 84);
    out->ndim = (int)get_u32(e + 88);
    out->nbytes = get_u64(e + 136);
    out->step = (int64_t)get_u64(e + 144);
    f->offsets[i] = get_u64(e + 128);
    f->sums[i] = get_u64(e + 152);
    if (out->fmt < VRAM_WFMT_F32 || out->fmt > VRAM_WFMT_Q8_R || out->role < 0 || out->role > VRAM_MF_ROLE_OPT2 ||
        out->ndim < 1 || out->ndim > 4)
        return vram_error(VRAM_ERR_PARSE, "model file '%s': tensor '%s': format %u, role %d, %d dims", f->path, out->name,
                          (unsigned)out->fmt, out->role, out->ndim);
    int64_t rows = 1, cols = 1;
    for (int d = 0; d < out->ndim; d++) {
        out->shape[d] = (int64_t)get_u64(e + 96 + 8 * d);
        if (out->shape[d] < 1 || out->shape[d] > ((int64_t)1 << 40))
            return vram_error(VRAM_ERR_PARSE, "model file '%s': tensor '%s': dimension %lld", f->path, out->name,
                              (long long)out->shape[d]);
        if (d + 1 < out->ndim) rows *= out->shape[d];
        else cols = out->shape[d];
        if (rows > ((int64_t)1 << 40)) return vram_error(VRAM_ERR_PARSE, "model file '%s': tensor '%s' too large", f->path, out->name);
    }
    if (out->fmt == VRAM_WFMT_Q8_0 && cols % 32)
        return vram_error(VRAM_ERR_PARSE, "model file '%s': q8_0 tensor '%s' has %lld columns, not a multiple of 32", f->path,
                          out->name, (long long)cols);
    if (vram_wfmt_bytes(out->fmt, rows, cols) != out->nbytes)
        return vram_error(VRAM_ERR_PARSE, "model file '%s': tensor '%s' has %llu bytes, its shape and format need %llu",
                          f->path, out->name, (unsigned long long)out->nbytes,
                          (unsigned long long)vram_wfmt_bytes(out->fmt, rows, cols));
    if (f->offsets[i] < HEADER_BYTES || f->offsets[i] > dir_offset || out->nbytes > dir_offset - f->offsets[i])
        return vram_error(VRAM_ERR_PARSE, "model file '%s': tensor '%s' at [%llu, +%llu) lies outside the data section",
                          f->path, out->name, (unsigned long long)f->offsets[i], (unsigned long long)out->nbytes);
    return VRAM_OK;
}

/* The checks on a mapped file; f->map and f->size are set. */
static vram_status file_check(vram_model_file *f) {
    const uint8_t *h = f->map;
    if (f->size < HEADER_BYTES || memcmp(h, MAGIC, 8))
        return vram_error(VRAM_ERR_PARSE, "'%s' is not a vram model file (no VRAMMODL header)", f->path);
    uint32_t version = get_u32(h + 8);
    if (version != VRAM_MODEL_FILE_VERSION)
        return vram_error(VRAM_ERR_PARSE, "model file '%s' is format version %u; this vram reads version %d", f->path,
                          version, VRAM_MODEL_FILE_VERSION);
    if (get_u64(h + 248) != checksum(h, 248))
        return vram_error(VRAM_ERR_PARSE, "model file '%s': header checksum mismatch (corrupted file)", f->path);
    uint64_t dir_offset = get_u64(h + 184), want = get_u64(h + 192);
    if (want != f->size)
        return vram_error(VRAM_ERR_PARSE, "model file '%s' is %llu bytes, its header says %llu (%s)", f->path,
                          (unsigned long long)f->size, (unsigned long long)want, f->size < want ? "truncated" : "trailing bytes");
    f->n = get_u32(h + 20);
    if (dir_offset < HEADER_BYTES || dir_offset > f->size || (f->size - dir_offset) / ENTRY_BYTES != f->n ||
        (f->size - dir_offset) % ENTRY_BYTES)
        return vram_error(VRAM_ERR_PARSE, "model file '%s': directory of %u entries does not fit at offset %llu", f->path,
                          f->n, (unsigned long long)dir_offset);
    if (get_u64(h + 200) != checksum(h + dir_offset, (uint64_t)f->n * ENTRY_BYTES))
        return vram_error(VRAM_ERR_PARSE, "model file '%s': directory checksum mismatch (corrupted file)", f->path);
    header_decode(h, &f->info);
    f->entries = calloc(f->n + 1, sizeof *f->entries);
    f->offsets = calloc(f->n + 1, sizeof *f->offsets);
    f->sums = calloc(f->n + 1, sizeof *f->sums);
    f->names = calloc(f->n + 1, sizeof *f->names);
    if (!f->entries || !f->offsets || !f->sums || !f->names) return vram_error(VRAM_ERR_HOST_MEMORY, "model file: out of host memory");
    for (uint32_t i = 0; i < f->n; i++) {
        vram_status s = entry_decode(f, i, h + dir_offset + (uint64_t)i * ENTRY_BYTES, dir_offset);
        if (s != VRAM_OK) return s;
    }
    return VRAM_OK;
}

vram_status vram_model_file_open(const char *path, vram_model_file **out) {
    if (!path || !out) return vram_error(VRAM_ERR_INVALID_ARG, "model file: null argument");
    vram_model_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return vram_error(VRAM_ERR_HOST_MEMORY, "model file: out of host memory");
    }
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    vram_status s = VRAM_OK;
    struct stat st;
    if (f->fd < 0) {
        s = vram_error(errno == ENOENT ? VRAM_ERR_NOT_FOUND : VRAM_ERR_IO, "model file '%s': %s", path, strerror(errno));
    } else if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        s = vram_error(VRAM_ERR_IO, "model file '%s': not a regular file", path);
    } else {
        f->size = (uint64_t)st.st_size;
        if (f->size < HEADER_BYTES) {
            s = vram_error(VRAM_ERR_PARSE, "'%s' (%llu bytes) is not a vram model file (shorter than its header)", path,
                           (unsigned long long)f->size);
        } else {
            void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
            if (p == MAP_FAILED) s = vram_error(VRAM_ERR_IO, "model file '%s': mmap failed: %s", path, strerror(errno));
            else f->map = p;
        }
    }
    if (s == VRAM_OK) s = file_check(f);
    if (s != VRAM_OK) {
        vram_model_file_close(f);
        return s;
    }
    *out = f;
    return VRAM_OK;
}

void vram_model_file_close(vram_model_file *f) {
    if (!f) return;
    if (f->map) munmap((void *)f->map, f->size);
    if (f->fd >= 0) close(f->fd);
    free(f->entries);
    free(f->offsets);
    free(f->sums);
    free(f->names);
    free(f->path);
    free(f);
}

const vram_model_info *vram_model_file_info(const vram_model_file *f) { return &f->info; }
int vram_model_file_count(const vram_model_file *f) { return (int)f->n; }
void vram_model_file_entry(const vram_model_file *f, int i, vram_model_entry *e) { *e = f->entries[i]; }
uint64_t vram_model_file_bytes_read(const vram_model_file *f) { return f->bytes_read; }

int vram_model_file_find(const vram_model_file *f, const char *name, int role) {
    for (uint32_t i = 0; i < f->n; i++)
        if (f->entries[i].role == role && !strcmp(f->entries[i].name, name)) return (int)i;
    return -1;
}

vram_status vram_model_file_read(vram_model_file *f, int i, void *dst, uint64_t cap) {
    if (i < 0 || (uint32_t)i >= f->n) return vram_error(VRAM_ERR_INVALID_ARG, "model file: no entry %d", i);
    const vram_model_entry *e = &f->entries[i];
    if (cap < e->nbytes)
        return vram_error(VRAM_ERR_INVALID_ARG, "model file: tensor '%s' needs %llu bytes, the buffer has %llu", e->name,
                          (unsigned long long)e->nbytes, (unsigned long long)cap);
    struct stat st; /* the file may have shrunk since it was mapped: touching pages past its end would fault */
    if (fstat(f->fd, &st) != 0 || (uint64_t)st.st_size < f->offsets[i] + e->nbytes)
        return vram_error(VRAM_ERR_IO, "model file '%s' was truncated while being read (tensor '%s')", f->path, e->name);
    memcpy(dst, f->map + f->offsets[i], e->nbytes);
    if (checksum(dst, e->nbytes) != f->sums[i])
        return vram_error(VRAM_ERR_PARSE, "model file '%s': tensor '%s' checksum mismatch (corrupted file)", f->path, e->name);
    f->bytes_read += e->nbytes;
    return VRAM_OK;
}

/* data.c — the byte dataset (data.h).
 *
 * The whole file read into host memory at open (not mapped: a mapped file truncated by another
 * program while training runs would end the process with SIGBUS), so later changes to the file
 * do not reach the training; a file that shrinks during the read is an error.
 * Train split = [0, n - val), validation = [n - val, n), val = n * val_fraction.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/file_open.h"
#include "rt_internal.h"
#include "vram/data.h"

struct vram_text_data {
    const uint8_t *bytes;
    uint64_t size, val_start;
};

vram_status vram_text_data_open(const char *path, double val_fraction, vram_text_data **out) {
    if (!path || !out) return vram_error(VRAM_ERR_INVALID_ARG, "dataset: null argument");
    if (!(val_fraction >= 0 && val_fraction < 1))
        return vram_error(VRAM_ERR_INVALID_ARG, "dataset: validation fraction %g outside [0, 1)", val_fraction);
    const char *why = NULL;
    int fd = vram_file_open_read(path, 0, &why); /* (a FIFO is refused, not waited on) */
    if (fd < 0 && why) return vram_error(VRAM_ERR_IO, "dataset '%s' %s", path, why);
    if (fd < 0)
        return vram_error(errno == ENOENT ? VRAM_ERR_NOT_FOUND : VRAM_ERR_IO, "dataset '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return vram_error(VRAM_ERR_IO, "dataset '%s': %s", path, strerror(errno));
    }
    if (st.st_size < 64) {
        close(fd);
        return vram_error(VRAM_ERR_INVALID_ARG, "dataset '%s': %lld bytes is too small to train on", path,
                          (long long)st.st_size);
    }
    /* Read whole, not mapped: a mapping of a file that another program truncates meanwhile
     * kills the reader with SIGBUS at the first batch past the new end. */
    uint8_t *p = (uint64_t)st.st_size < SIZE_MAX ? malloc((size_t)st.st_size) : NULL;
    vram_text_data *d = p ? calloc(1, sizeof *d) : NULL;
    if (!d) {
        free(p);
        close(fd);
        return vram_error(VRAM_ERR_HOST_MEMORY, "dataset '%s': host out of memory for its %lld bytes", path,
                          (long long)st.st_size);
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, p + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            vram_status e = n < 0 ? vram_error(VRAM_ERR_IO, "dataset '%s': read error: %s", path, strerror(errno))
                                  : vram_error(VRAM_ERR_IO, "dataset '%s' shrank while being read: %zu of %lld bytes",
                                               path, got, (long long)st.st_size);
            free(p);
            free(d);
            close(fd);
            return e;
        }
        got += (size_t)n;
    }
    close(fd);
    d->bytes = p;
    d->size = (uint64_t)st.st_size;
    d->val_start = d->size - (uint64_t)((double)d->size * val_fraction);
    *out = d;
    return VRAM_OK;
}

void vram_text_data_close(vram_text_data *d) {
    if (!d) return;
    free((void *)d->bytes);
    free(d);
}

uint64_t vram_text_data_size(const vram_text_data *d) { return d->size; }

uint64_t vram_text_data_split_size(const vram_text_data *d, int split) {
    return split == VRAM_SPLIT_VAL ? d->size - d->val_start : d->val_start;
}

vram_status vram_text_data_batch(vram_text_data *d, vram_runtime *rt, int split, int64_t batch, int64_t context,
                                 vram_tensor **ids, vram_tensor **targets) {
    return vram_text_data_batch_rows(d, rt, split, batch, 0, batch, context, ids, targets);
}

vram_status vram_text_data_batch_rows(vram_text_data *d, vram_runtime *rt, int split, int64_t total, int64_t first,
                                      int64_t batch, int64_t context, vram_tensor **ids, vram_tensor **targets) {
    if (!d || !rt || !ids || !targets || batch < 1 || context < 1 || first < 0 || first > total - batch)
        return vram_error(VRAM_ERR_INVALID_ARG, "dataset batch: rows %lld..%lld of %lld, context %lld", (long long)first,
                          (long long)(first + batch), (long long)total, (long long)context);
    uint64_t lo = split == VRAM_SPLIT_VAL ? d->val_start : 0, hi = split == VRAM_SPLIT_VAL ? d->size : d->val_start;
    if (hi - lo < (uint64_t)context + 1)
        return vram_error(VRAM_ERR_INVALID_ARG, "dataset batch: the %s split has %llu bytes, fewer than context %lld + 1",
                          split == VRAM_SPLIT_VAL ? "validation" : "training", (unsigned long long)(hi - lo),
                          (long long)context);
    int64_t shape[2] = {batch, context};
    vram_tensor *x = NULL, *y = NULL;
    vram_status s = vram_tensor_empty(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, &x);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, &y);
    if (s != VRAM_OK) {
        vram_tensor_free(x);
        return s;
    }
    /* built on the host, then copied to the runtime's device */
    int32_t *xp = malloc(sizeof *xp * (size_t)(batch * context)), *yp = malloc(sizeof *yp * (size_t)(batch * context));
    if (!xp || !yp) {
        free(xp);
        free(yp);
        vram_tensor_free(x);
        vram_tensor_free(y);
        return vram_error(VRAM_ERR_HOST_MEMORY, "dataset batch: out of host memory");
    }
    uint64_t span = hi - lo - (uint64_t)context;
    for (int64_t row = 0; row < total; row++) {
        uint64_t off = lo + (uint64_t)(vram_runtime_uniform(rt) * (double)span);
        if (off >= lo + span) off = lo + span - 1;
        if (row < first || row >= first + batch) continue; /* another rank's window */
        int64_t b = row - first;
        const uint8_t *src = d->bytes + off;
        for (int64_t t = 0; t < context; t++) {
            xp[b * context + t] = src[t];
            yp[b * context + t] = src[t + 1];
        }
    }
    vram_tensor_write_host(x, xp);
    vram_tensor_write_host(y, yp);
    free(xp);
    free(yp);
    *ids = x;
    *targets = y;
    return VRAM_OK;
}

double vram_text_data_unigram_entropy(const vram_text_data *d) {
    uint64_t counts[256] = {0};
    for (uint64_t i = 0; i < d->val_start; i++) counts[d->bytes[i]]++;
    double h = 0, n = (double)d->val_start;
    for (int c = 0; c < 256; c++)
        if (counts[c]) {
            double p = (double)counts[c] / n;
            h -= p * log(p);
        }
    return h;
}

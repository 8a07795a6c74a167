/* smi_out.h — the pieces of `vram smi` shared by its files: a sample (one read of the chosen
 * GPUs), a growable text buffer, the output formats that render a sample into text, and the
 * small HTTP server behind --listen.
 *
 * Every renderer appends to a smi_buf and never writes itself: the command writes each finished
 * piece (a frame, a JSON line, a block of CSV rows) with one write() call, so a reader or a
 * killed process never sees half a line.
 */
#ifndef VRAM_CLI_SMI_OUT_H
#define VRAM_CLI_SMI_OUT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "vram/smi.h"

typedef struct smi_buf {
    char *data;
    size_t len, cap;
    int failed; /* an allocation failed: the text is incomplete */
} smi_buf;

void smi_buf_printf(smi_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void smi_buf_put(smi_buf *b, const char *s, size_t n);
void smi_buf_free(smi_buf *b);

/* Bytes in MiB with a partial MiB rounded up, as nvidia-smi shows used memory (and without
 * overflow near 2^64, where adding 0xFFFFF first would wrap to 0). */
unsigned long long smi_mib_up(uint64_t bytes);

typedef struct smi_sample {
    int64_t time_ms;          /* wall clock, ms since the epoch */
    double duration_s;        /* how long the NVML reads took */
    const char *driver;
    size_t count;
    vram_smi_device *devs;
} smi_sample;

/* Field lists for --csv, nvidia-smi style (--query-gpu / --query-compute-apps). */
#define SMI_MAX_FIELDS 24
typedef struct smi_csv {
    int apps;                 /* 1: one row per process (--query-compute-apps) */
    int header, units;
    size_t nfields;
    int fields[SMI_MAX_FIELDS];
} smi_csv;

/* Parses "index,memory.used" into `c` for the kind in c->apps. Returns 0, or -1 with an
 * explanation in `err`. */
int smi_csv_parse_fields(smi_csv *c, const char *list, char *err, size_t err_cap);
void smi_csv_default_fields(smi_csv *c, int with_timestamp);
void smi_render_csv_header(smi_buf *b, const smi_csv *c);
void smi_render_csv_rows(smi_buf *b, const smi_csv *c, const smi_sample *s);

/* One JSON object on one line, ending in '\n'. */
void smi_render_json(smi_buf *b, const smi_sample *s);

/* Prometheus text exposition format 0.0.4. */
void smi_render_prometheus(smi_buf *b, const smi_sample *s);

/* The human table. `history` holds, per device of the sample, `hist_len` past memory-used
 * fractions (0..1, negative = no data), oldest first; NULL for a one-shot table. Each line ends
 * in `eol` ("\n", or "\033[K\n" when redrawing in place) and is cut to `width` columns. */
typedef struct smi_table_opts {
    const double *const *history;
    size_t hist_len;
    int width;
    int utf8;
    const char *eol;
    const char *host;
} smi_table_opts;
void smi_render_table(smi_buf *b, const smi_sample *s, const smi_table_opts *o);

/* Serves GET /metrics on `addr` ("127.0.0.1:9400", "[::1]:9400", ":9400", "localhost:9400")
 * until *stop is set. `render` produces the body for each request. Refuses a non-loopback
 * address unless allow_remote. Returns 0 after a clean stop, 2 for a bad or refused address
 * (message printed), 1 for a failure while serving. */
typedef int (*smi_render_fn)(void *ctx, smi_buf *body);
int smi_http_serve(const char *addr, int allow_remote, smi_render_fn render, void *ctx,
                   volatile sig_atomic_t *stop);

/* The address checks of smi_http_serve alone (resolve, loopback unless allow_remote), so that a
 * bad --listen is named before NVML is loaded: 0, or 2 with the message printed. */
int smi_http_check(const char *addr, int allow_remote);

#endif

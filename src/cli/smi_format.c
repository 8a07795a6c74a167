/* smi_format.c — `vram smi`'s output formats: the table, CSV in nvidia-smi's shape, JSON lines
 * and Prometheus text. Each renders a smi_sample into a smi_buf.
 *
 * Units: people read MiB (the table, CSV, like nvidia-smi); programs get bytes (JSON,
 * Prometheus, base units as Prometheus asks). A field a GPU does not give is "N/A" in the
 * table, "[N/A]" in CSV (nvidia-smi's spelling), null in JSON and an absent series in
 * Prometheus. A GPU NVML cannot read at all shows its error text in each of them.
 *
 * CSV fields are a table of names (nvidia-smi's where it has one) with a header unit and a
 * function that prints the value; --query-gpu / --query-compute-apps pick and order them.
 */
#include "smi_out.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB (1024.0 * 1024.0)

/* ---- buffer ------------------------------------------------------------------------------ */

static int buf_reserve(smi_buf *b, size_t extra) {
    if (b->failed) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void smi_buf_put(smi_buf *b, const char *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void smi_buf_printf(smi_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        smi_buf_put(b, small, (size_t)n);
        return;
    }
    if (!buf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void smi_buf_free(smi_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ---- shared helpers ---------------------------------------------------------------------- */

/* Whole MiB the way nvidia-smi prints them. Seen on driver 580 (bench/results/2026-12-02-smi-gpu.md):
 * used 3870097408 B showed as 3691 and reserved 644939776 B as 616, i.e. rounded up; total is
 * a whole number of MiB anyway. A partial MiB in use counts as used; free rounds down. */
unsigned long long smi_mib_up(uint64_t bytes) { return (unsigned long long)((bytes >> 20) + ((bytes & 0xFFFFF) != 0)); }
static unsigned long long mib_down(uint64_t bytes) { return (unsigned long long)(bytes >> 20); }

static const char *kinds_text(uint32_t kinds) {
    if ((kinds & VRAM_SMI_PROCESS_COMPUTE) && (kinds & VRAM_SMI_PROCESS_GRAPHICS)) return "C+G";
    return (kinds & VRAM_SMI_PROCESS_GRAPHICS) ? "G" : "C";
}

/* The program name: the first word of the command line. */
static void argv0(const char *command, char *out, size_t cap) {
    size_t n = strcspn(command, " ");
    if (n >= cap) n = cap - 1;
    memcpy(out, command, n);
    out[n] = '\0';
}

static void format_time(int64_t ms, char *out, size_t cap, int iso) {
    time_t sec = (time_t)(ms / 1000);
    struct tm tm;
    if (iso) {
        gmtime_r(&sec, &tm);
        strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
        size_t n = strlen(out);
        snprintf(out + n, cap - n, ".%03dZ", (int)(ms % 1000));
    } else {
        localtime_r(&sec, &tm);
        strftime(out, cap, "%Y/%m/%d %H:%M:%S", &tm);
        size_t n = strlen(out);
        snprintf(out + n, cap - n, ".%03d", (int)(ms % 1000));
    }
}

/* ---- CSV --------------------------------------------------------------------------------- */

enum field_kind { FK_GPU, FK_APP };

typedef struct csv_ctx {
    const smi_sample *s;
    const vram_smi_device *d;
    const vram_smi_process *p;
    int units;
} csv_ctx;

typedef void (*field_fn)(smi_buf *b, const csv_ctx *c);

static void na(smi_buf *b) { smi_buf_put(b, "[N/A]", 5); }

/* RFC 4180 quoting, only when needed: nvidia-smi never quotes, but names and command lines can
 * hold commas. */
static void csv_text(smi_buf *b, const char *t) {
    if (!strpbrk(t, ",\"\n\r")) {
        smi_buf_put(b, t, strlen(t));
        return;
    }
    smi_buf_put(b, "\"", 1);
    for (const char *p = t; *p; p++) {
        if (*p == '"') smi_buf_put(b, "\"", 1);
        smi_buf_put(b, p, 1);
    }
    smi_buf_put(b, "\"", 1);
}

static void f_timestamp(smi_buf *b, const csv_ctx *c) {
    char t[64];
    format_time(c->s->time_ms, t, sizeof t, 0);
    smi_buf_put(b, t, strlen(t));
}
static void f_index(smi_buf *b, const csv_ctx *c) { smi_buf_printf(b, "%u", c->d->index); }
static void f_name(smi_buf *b, const csv_ctx *c) {
    if (c->d->valid & VRAM_SMI_HAS_NAME) csv_text(b, c->d->name); else na(b);
}
static void f_uuid(smi_buf *b, const csv_ctx *c) {
    if (c->d->valid & VRAM_SMI_HAS_UUID) csv_text(b, c->d->uuid); else na(b);
}
static void f_driver(smi_buf *b, const csv_ctx *c) {
    if (c->s->driver && c->s->driver[0]) csv_text(b, c->s->driver); else na(b);
}
static void mib_value(smi_buf *b, const csv_ctx *c, int ok, unsigned long long mib) {
    if (!ok) na(b);
    else smi_buf_printf(b, c->units ? "%llu MiB" : "%llu", mib);
}
static void f_mem_total(smi_buf *b, const csv_ctx *c) { mib_value(b, c, c->d->valid & VRAM_SMI_HAS_MEMORY, mib_down(c->d->total_bytes)); }
static void f_mem_used(smi_buf *b, const csv_ctx *c) { mib_value(b, c, c->d->valid & VRAM_SMI_HAS_MEMORY, smi_mib_up(c->d->used_bytes)); }
static void f_mem_free(smi_buf *b, const csv_ctx *c) { mib_value(b, c, c->d->valid & VRAM_SMI_HAS_MEMORY, mib_down(c->d->free_bytes)); }
static void f_mem_reserved(smi_buf *b, const csv_ctx *c) { mib_value(b, c, c->d->valid & VRAM_SMI_HAS_RESERVED, smi_mib_up(c->d->reserved_bytes)); }
static void pct_value(smi_buf *b, const csv_ctx *c, int ok, uint32_t v) {
    if (!ok) na(b);
    else smi_buf_printf(b, c->units ? "%u %%" : "%u", v);
}
static void f_util_gpu(smi_buf *b, const csv_ctx *c) { pct_value(b, c, c->d->valid & VRAM_SMI_HAS_UTILIZATION, c->d->utilization_gpu_pct); }
static void f_util_mem(smi_buf *b, const csv_ctx *c) { pct_value(b, c, c->d->valid & VRAM_SMI_HAS_UTILIZATION, c->d->utilization_memory_pct); }
static void f_temp(smi_buf *b, const csv_ctx *c) {
    if (c->d->valid & VRAM_SMI_HAS_TEMPERATURE) smi_buf_printf(b, "%u", c->d->temperature_c); else na(b);
}
static void watt_value(smi_buf *b, const csv_ctx *c, int ok, uint32_t mw) {
    if (!ok) na(b);
    else smi_buf_printf(b, c->units ? "%.2f W" : "%.2f", mw / 1000.0);
}
static void f_power(smi_buf *b, const csv_ctx *c) { watt_value(b, c, c->d->valid & VRAM_SMI_HAS_POWER, c->d->power_mw); }
static void f_power_limit(smi_buf *b, const csv_ctx *c) { watt_value(b, c, c->d->valid & VRAM_SMI_HAS_POWER_LIMIT, c->d->power_limit_mw); }
static void f_pid(smi_buf *b, const csv_ctx *c) { smi_buf_printf(b, "%u", c->p->pid); }
static void f_process_name(smi_buf *b, const csv_ctx *c) {
    char name[256];
    argv0(c->p->command, name, sizeof name);
    if (name[0]) csv_text(b, name); else na(b);
}
static void f_command(smi_buf *b, const csv_ctx *c) {
    if (c->p->command[0]) csv_text(b, c->p->command); else na(b);
}
static void f_user(smi_buf *b, const csv_ctx *c) {
    if (c->p->user[0]) csv_text(b, c->p->user); else na(b);
}
static void f_type(smi_buf *b, const csv_ctx *c) { smi_buf_printf(b, "%s", kinds_text(c->p->kinds)); }
static void f_used_memory(smi_buf *b, const csv_ctx *c) { mib_value(b, c, c->p->memory_known, smi_mib_up(c->p->used_bytes)); }

static const struct field {
    const char *name;
    const char *unit; /* header suffix, NULL for none */
    const char *header; /* the header's name when it differs from the field's (nvidia-smi's) */
    int kind;         /* FK_GPU: a GPU field (usable in both lists); FK_APP: process only */
    field_fn fn;
} fields[] = {
    {"timestamp", NULL, NULL, FK_GPU, f_timestamp},
    {"index", NULL, NULL, FK_GPU, f_index},
    {"name", NULL, NULL, FK_GPU, f_name},
    {"uuid", NULL, NULL, FK_GPU, f_uuid},
    {"driver_version", NULL, NULL, FK_GPU, f_driver},
    {"memory.total", "MiB", NULL, FK_GPU, f_mem_total},
    {"memory.reserved", "MiB", NULL, FK_GPU, f_mem_reserved},
    {"memory.used", "MiB", NULL, FK_GPU, f_mem_used},
    {"memory.free", "MiB", NULL, FK_GPU, f_mem_free},
    {"utilization.gpu", "%", NULL, FK_GPU, f_util_gpu},
    {"utilization.memory", "%", NULL, FK_GPU, f_util_mem},
    {"temperature.gpu", NULL, NULL, FK_GPU, f_temp},
    {"power.draw", "W", NULL, FK_GPU, f_power},
    {"power.limit", "W", NULL, FK_GPU, f_power_limit},
    /* process fields, with nvidia-smi's --query-compute-apps names */
    {"gpu_index", NULL, NULL, FK_APP, f_index},
    {"gpu_uuid", NULL, NULL, FK_APP, f_uuid},
    {"gpu_name", NULL, NULL, FK_APP, f_name},
    {"pid", NULL, NULL, FK_APP, f_pid},
    {"process_name", NULL, NULL, FK_APP, f_process_name},
    {"command", NULL, NULL, FK_APP, f_command},
    {"user", NULL, NULL, FK_APP, f_user},
    {"type", NULL, NULL, FK_APP, f_type},
    {"used_memory", "MiB", "used_gpu_memory", FK_APP, f_used_memory},
    {"used_gpu_memory", "MiB", NULL, FK_APP, f_used_memory},
};
#define NFIELDS (int)(sizeof fields / sizeof fields[0])

static int find_field(const char *name, size_t n, int apps) {
    for (int i = 0; i < NFIELDS; i++) {
        if (strlen(fields[i].name) != n || strncmp(fields[i].name, name, n) != 0) continue;
        if (fields[i].kind == FK_APP && !apps) continue;
        if (apps && fields[i].kind == FK_GPU && strcmp(fields[i].name, "timestamp") != 0) continue;
        return i;
    }
    return -1;
}

int smi_csv_parse_fields(smi_csv *c, const char *list, char *err, size_t err_cap) {
    c->nfields = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        while (n && p[0] == ' ') p++, n--;
        size_t m = n;
        while (m && p[m - 1] == ' ') m--;
        if (m) {
            int f = find_field(p, m, c->apps);
            if (f < 0) {
                char names[1024] = "";
                for (int i = 0; i < NFIELDS; i++) {
                    int usable = c->apps ? (fields[i].kind == FK_APP || !strcmp(fields[i].name, "timestamp"))
                                         : fields[i].kind == FK_GPU;
                    if (!usable) continue;
                    size_t l = strlen(names);
                    snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", fields[i].name);
                }
                snprintf(err, err_cap, "unknown %s field '%.*s' (known: %s)", c->apps ? "--query-compute-apps" : "--query-gpu",
                         (int)m, p, names);
                return -1;
            }
            if (c->nfields == SMI_MAX_FIELDS) {
                snprintf(err, err_cap, "too many fields (at most %d)", SMI_MAX_FIELDS);
                return -1;
            }
            c->fields[c->nfields++] = f;
        }
        p += n;
        if (*p == ',') p++;
    }
    if (!c->nfields) {
        snprintf(err, err_cap, "empty field list");
        return -1;
    }
    return 0;
}

void smi_csv_default_fields(smi_csv *c, int with_timestamp) {
    static const char *gpu = "index,name,uuid,memory.used,memory.reserved,memory.free,memory.total,"
                             "utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit";
    static const char *apps = "gpu_index,gpu_uuid,pid,user,type,process_name,used_memory";
    char list[512], err[64];
    snprintf(list, sizeof list, "%s%s", with_timestamp ? "timestamp," : "", c->apps ? apps : gpu);
    smi_csv_parse_fields(c, list, err, sizeof err);
}

void smi_render_csv_header(smi_buf *b, const smi_csv *c) {
    for (size_t i = 0; i < c->nfields; i++) {
        const struct field *f = &fields[c->fields[i]];
        const char *name = f->header ? f->header : f->name;
        if (i) smi_buf_put(b, ", ", 2);
        if (f->unit && c->units) smi_buf_printf(b, "%s [%s]", name, f->unit);
        else smi_buf_printf(b, "%s", name);
    }
    smi_buf_put(b, "\n", 1);
}

static void csv_row(smi_buf *b, const smi_csv *c, const csv_ctx *ctx) {
    for (size_t i = 0; i < c->nfields; i++) {
        const struct field *f = &fields[c->fields[i]];
        if (i) smi_buf_put(b, ", ", 2);
        int needs_device = strcmp(f->name, "timestamp") && strcmp(f->name, "index") && strcmp(f->name, "gpu_index") &&
                           strcmp(f->name, "driver_version");
        if (needs_device && ctx->d->nvml_error) smi_buf_printf(b, "[%s]", ctx->d->error);
        else f->fn(b, ctx);
    }
    smi_buf_put(b, "\n", 1);
}

void smi_render_csv_rows(smi_buf *b, const smi_csv *c, const smi_sample *s) {
    csv_ctx ctx = {s, NULL, NULL, c->units};
    for (size_t g = 0; g < s->count; g++) {
        ctx.d = &s->devs[g];
        if (!c->apps) {
            csv_row(b, c, &ctx);
            continue;
        }
        for (size_t i = 0; i < ctx.d->process_count; i++) {
            ctx.p = &ctx.d->processes[i];
            csv_row(b, c, &ctx);
        }
    }
}

/* ---- JSON -------------------------------------------------------------------------------- */

static void put_buf(void *b, const char *bytes, size_t n) { smi_buf_put(b, bytes, n); }

/* (process names and users are any bytes: what is not UTF-8 becomes U+FFFD, so each line parses) */
static void json_str(smi_buf *b, const char *t) { vram_json_escape(t, SIZE_MAX, put_buf, b); }

static void json_str_or_null(smi_buf *b, int ok, const char *t) {
    if (ok) json_str(b, t); else smi_buf_put(b, "null", 4);
}

static void json_u64(smi_buf *b, int ok, uint64_t v) {
    if (ok) smi_buf_printf(b, "%llu", (unsigned long long)v); else smi_buf_put(b, "null", 4);
}

static void json_watts(smi_buf *b, int ok, uint32_t mw) {
    if (ok) smi_buf_printf(b, "%.3f", mw / 1000.0); else smi_buf_put(b, "null", 4);
}

void smi_render_json(smi_buf *b, const smi_sample *s) {
    char t[64];
    format_time(s->time_ms, t, sizeof t, 1);
    smi_buf_printf(b, "{\"timestamp\":\"%s\",\"time_ms\":%lld,\"driver_version\":", t, (long long)s->time_ms);
    json_str_or_null(b, s->driver && s->driver[0], s->driver ? s->driver : "");
    smi_buf_put(b, ",\"gpus\":[", 9);
    for (size_t g = 0; g < s->count; g++) {
        const vram_smi_device *d = &s->devs[g];
        uint32_t v = d->valid;
        if (g) smi_buf_put(b, ",", 1);
        smi_buf_printf(b, "{\"index\":%u,\"error\":", d->index);
        json_str_or_null(b, d->nvml_error != 0, d->error);
        smi_buf_put(b, ",\"name\":", 8);
        json_str_or_null(b, v & VRAM_SMI_HAS_NAME, d->name);
        smi_buf_put(b, ",\"uuid\":", 8);
        json_str_or_null(b, v & VRAM_SMI_HAS_UUID, d->uuid);
        smi_buf_put(b, ",\"memory_total_bytes\":", 22);
        json_u64(b, v & VRAM_SMI_HAS_MEMORY, d->total_bytes);
        smi_buf_put(b, ",\"memory_used_bytes\":", 21);
        json_u64(b, v & VRAM_SMI_HAS_MEMORY, d->used_bytes);
        smi_buf_put(b, ",\"memory_reserved_bytes\":", 25);
        json_u64(b, v & VRAM_SMI_HAS_RESERVED, d->reserved_bytes);
        smi_buf_put(b, ",\"memory_free_bytes\":", 21);
        json_u64(b, v & VRAM_SMI_HAS_MEMORY, d->free_bytes);
        smi_buf_put(b, ",\"memory_version\":", 18);
        json_u64(b, v & VRAM_SMI_HAS_MEMORY, d->memory_version);
        smi_buf_put(b, ",\"utilization_gpu_percent\":", 27);
        json_u64(b, v & VRAM_SMI_HAS_UTILIZATION, d->utilization_gpu_pct);
        smi_buf_put(b, ",\"utilization_memory_percent\":", 30);
        json_u64(b, v & VRAM_SMI_HAS_UTILIZATION, d->utilization_memory_pct);
        smi_buf_put(b, ",\"temperature_c\":", 17);
        json_u64(b, v & VRAM_SMI_HAS_TEMPERATURE, d->temperature_c);
        smi_buf_put(b, ",\"power_w\":", 11);
        json_watts(b, v & VRAM_SMI_HAS_POWER, d->power_mw);
        smi_buf_put(b, ",\"power_limit_w\":", 17);
        json_watts(b, v & VRAM_SMI_HAS_POWER_LIMIT, d->power_limit_mw);
        smi_buf_put(b, ",\"processes\":", 13);
        if (!(v & VRAM_SMI_HAS_PROCESSES)) {
            smi_buf_put(b, "null}", 5);
            continue;
        }
        smi_buf_put(b, "[", 1);
        for (size_t i = 0; i < d->process_count; i++) {
            const vram_smi_process *p = &d->processes[i];
            if (i) smi_buf_put(b, ",", 1);
            smi_buf_printf(b, "{\"pid\":%u,\"type\":\"%s\",\"user\":", p->pid, kinds_text(p->kinds));
            json_str_or_null(b, p->user[0] != '\0', p->user);
            smi_buf_put(b, ",\"command\":", 11);
            json_str_or_null(b, p->command[0] != '\0', p->command);
            smi_buf_put(b, ",\"used_memory_bytes\":", 21);
            json_u64(b, p->memory_known, p->used_bytes);
            smi_buf_put(b, "}", 1);
        }
        smi_buf_put(b, "]}", 2);
    }
    smi_buf_put(b, "]}\n", 3);
}

/* ---- Prometheus -------------------------------------------------------------------------- */

static void prom_label_value(smi_buf *b, const char *t) {
    for (const char *p = t; *p; p++) {
        if (*p == '\\') smi_buf_put(b, "\\\\", 2);
        else if (*p == '"') smi_buf_put(b, "\\\"", 2);
        else if (*p == '\n') smi_buf_put(b, "\\n", 2);
        else smi_buf_put(b, p, 1);
    }
}

static void prom_gpu_labels(smi_buf *b, const vram_smi_device *d) {
    smi_buf_printf(b, "{gpu=\"%u\",uuid=\"", d->index);
    prom_label_value(b, (d->valid & VRAM_SMI_HAS_UUID) ? d->uuid : "");
    smi_buf_put(b, "\",name=\"", 8);
    prom_label_value(b, (d->valid & VRAM_SMI_HAS_NAME) ? d->name : "");
    smi_buf_put(b, "\"", 1);
}

static void prom_head(smi_buf *b, const char *name, const char *help) {
    smi_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

enum { PM_UP, PM_TOTAL, PM_USED, PM_RESERVED, PM_FREE, PM_USED_RATIO, PM_UTIL, PM_MEM_ACTIVITY, PM_TEMP,
       PM_POWER, PM_POWER_LIMIT, PM_COUNT };

static const struct {
    const char *name, *help;
    uint32_t needs;
} prom_metrics[PM_COUNT] = {
    {"vram_gpu_up", "1 if NVML could read the GPU, 0 if not (no permission, GPU lost).", 0},
    {"vram_gpu_memory_total_bytes", "Installed GPU memory in bytes.", VRAM_SMI_HAS_MEMORY},
    {"vram_gpu_memory_used_bytes", "GPU memory allocated by contexts, in bytes (nvidia-smi memory.used).", VRAM_SMI_HAS_MEMORY},
    {"vram_gpu_memory_reserved_bytes", "GPU memory reserved by the driver and firmware, in bytes.", VRAM_SMI_HAS_RESERVED},
    {"vram_gpu_memory_free_bytes", "Free GPU memory in bytes.", VRAM_SMI_HAS_MEMORY},
    {"vram_gpu_memory_used_ratio", "Used over total GPU memory, 0 to 1.", VRAM_SMI_HAS_MEMORY},
    {"vram_gpu_utilization_ratio", "Fraction of the last sample period in which a kernel ran, 0 to 1.", VRAM_SMI_HAS_UTILIZATION},
    {"vram_gpu_memory_activity_ratio", "Fraction of the last sample period in which memory was read or written, 0 to 1 (not capacity).", VRAM_SMI_HAS_UTILIZATION},
    {"vram_gpu_temperature_celsius", "GPU core temperature in degrees Celsius.", VRAM_SMI_HAS_TEMPERATURE},
    {"vram_gpu_power_watts", "Power draw in watts.", VRAM_SMI_HAS_POWER},
    {"vram_gpu_power_limit_watts", "Enforced power limit in watts.", VRAM_SMI_HAS_POWER_LIMIT},
};

void smi_render_prometheus(smi_buf *b, const smi_sample *s) {
    prom_head(b, "vram_gpu_info", "Constant 1 per GPU; labels name the GPU and the driver.");
    for (size_t g = 0; g < s->count; g++) {
        smi_buf_put(b, "vram_gpu_info", 13);
        prom_gpu_labels(b, &s->devs[g]); /* leaves the label set open for one more label */
        smi_buf_put(b, ",driver_version=\"", 17);
        prom_label_value(b, s->driver ? s->driver : "");
        smi_buf_put(b, "\"} 1\n", 5);
    }
    for (int m = 0; m < PM_COUNT; m++) {
        int any = 0;
        for (size_t g = 0; g < s->count; g++) {
            const vram_smi_device *d = &s->devs[g];
            int readable = d->nvml_error == 0;
            if (m != PM_UP && (!readable || (d->valid & prom_metrics[m].needs) != prom_metrics[m].needs)) continue;
            if (!any) prom_head(b, prom_metrics[m].name, prom_metrics[m].help);
            any = 1;
            smi_buf_printf(b, "%s", prom_metrics[m].name);
            prom_gpu_labels(b, d);
            smi_buf_put(b, "} ", 2);
            switch (m) {
            case PM_UP: smi_buf_printf(b, "%d\n", readable); break;
            case PM_TOTAL: smi_buf_printf(b, "%llu\n", (unsigned long long)d->total_bytes); break;
            case PM_USED: smi_buf_printf(b, "%llu\n", (unsigned long long)d->used_bytes); break;
            case PM_RESERVED: smi_buf_printf(b, "%llu\n", (unsigned long long)d->reserved_bytes); break;
            case PM_FREE: smi_buf_printf(b, "%llu\n", (unsigned long long)d->free_bytes); break;
            case PM_USED_RATIO: smi_buf_printf(b, "%.6f\n", d->total_bytes ? (double)d->used_bytes / (double)d->total_bytes : 0.0); break;
            case PM_UTIL: smi_buf_printf(b, "%.2f\n", d->utilization_gpu_pct / 100.0); break;
            case PM_MEM_ACTIVITY: smi_buf_printf(b, "%.2f\n", d->utilization_memory_pct / 100.0); break;
            case PM_TEMP: smi_buf_printf(b, "%u\n", d->temperature_c); break;
            case PM_POWER: smi_buf_printf(b, "%.3f\n", d->power_mw / 1000.0); break;
            case PM_POWER_LIMIT: smi_buf_printf(b, "%.3f\n", d->power_limit_mw / 1000.0); break;
            }
        }
    }
    int any = 0;
    for (size_t g = 0; g < s->count; g++) {
        const vram_smi_device *d = &s->devs[g];
        for (size_t i = 0; i < d->process_count; i++) {
            const vram_smi_process *p = &d->processes[i];
            if (!p->memory_known) continue;
            if (!any) prom_head(b, "vram_process_memory_used_bytes", "GPU memory used by a process on a GPU, in bytes.");
            any = 1;
            char name[256];
            argv0(p->command, name, sizeof name);
            smi_buf_put(b, "vram_process_memory_used_bytes", 30);
            prom_gpu_labels(b, d);
            smi_buf_printf(b, ",pid=\"%u\",user=\"", p->pid);
            prom_label_value(b, p->user);
            smi_buf_put(b, "\",command=\"", 11);
            prom_label_value(b, name);
            smi_buf_printf(b, "\"} %llu\n", (unsigned long long)p->used_bytes);
        }
    }
    prom_head(b, "vram_smi_sample_duration_seconds", "Time the NVML reads of this sample took.");
    smi_buf_printf(b, "vram_smi_sample_duration_seconds %.6f\n", s->duration_s);
}

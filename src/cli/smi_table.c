/* smi_table.c — the human table of `vram smi`: one line per GPU (memory with a bar,
 * utilization, temperature, power), in loop mode a sparkline of each GPU's recent memory use,
 * then the processes.
 *
 * Lines are built one at a time and cut to the terminal's width before the line end is added,
 * because a wrapped line would push the in-place redraw of `-l` down one row per frame.
 * Columns are counted as UTF-8 code points (the sparkline's blocks are one column each).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "smi_out.h"

#define BAR_WIDTH 20

/* Appends `line` to `b`, cut to `width` columns, then the line end. */
static void emit(smi_buf *b, smi_buf *line, const smi_table_opts *o) {
    size_t cols = 0, i = 0;
    const char *t = line->data ? line->data : "";
    size_t n = line->len;
    if (o->width > 0) {
        for (i = 0; i < n; i++) {
            if (((unsigned char)t[i] & 0xC0) == 0x80) continue; /* continuation byte */
            if (cols == (size_t)o->width) break;
            cols++;
        }
        n = i;
    }
    smi_buf_put(b, t, n);
    smi_buf_put(b, o->eol, strlen(o->eol));
    line->len = 0;
    if (line->data) line->data[0] = '\0';
}

/* Draws the history scaled between its own lowest and highest value, so a change of a few
 * hundred MiB on an 80 GiB card still shows; the caller prints the range beside it. */
static void spark(smi_buf *line, const double *hist, size_t n, int utf8, double *lo_out, double *hi_out) {
    static const char *blocks[8] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char ascii[8] = {'_', '.', ',', '-', '=', '+', '*', '#'};
    double lo = 2.0, hi = -1.0;
    for (size_t i = 0; i < n; i++) {
        if (hist[i] < 0) continue;
        if (hist[i] < lo) lo = hist[i];
        if (hist[i] > hi) hi = hist[i];
    }
    *lo_out = lo;
    *hi_out = hi;
    for (size_t i = 0; i < n; i++) {
        double v = hist[i];
        if (v < 0) {
            smi_buf_put(line, " ", 1);
            continue;
        }
        int level = hi - lo > 1e-9 ? (int)((v - lo) / (hi - lo) * 7.0 + 0.5) : 0;
        if (level > 7) level = 7;
        if (level < 0) level = 0;
        if (utf8) smi_buf_put(line, blocks[level], strlen(blocks[level]));
        else smi_buf_put(line, &ascii[level], 1);
    }
}

void smi_render_table(smi_buf *b, const smi_sample *s, const smi_table_opts *o) {
    smi_buf line = {0};
    char when[64];
    time_t sec = (time_t)(s->time_ms / 1000);
    struct tm tm;
    localtime_r(&sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    smi_buf_printf(&line, "vram smi   %s   %s   driver %s", o->host ? o->host : "", when,
                   s->driver && s->driver[0] ? s->driver : "N/A");
    emit(b, &line, o);
    smi_buf_printf(&line, "GPU  %-24s %21s  %-*s  %5s  %5s  %s", "NAME", "MEMORY USED / TOTAL", BAR_WIDTH + 2, "",
                   "UTIL", "TEMP", "POWER DRAW / LIMIT");
    emit(b, &line, o);
    int any_v1 = 0;
    for (size_t g = 0; g < s->count; g++) {
        const vram_smi_device *d = &s->devs[g];
        uint32_t v = d->valid;
        if (d->nvml_error) {
            smi_buf_printf(&line, "%3u  [%s]", d->index, d->error);
            emit(b, &line, o);
            continue;
        }
        smi_buf_printf(&line, "%3u  %-24.24s ", d->index, (v & VRAM_SMI_HAS_NAME) ? d->name : "N/A");
        if (v & VRAM_SMI_HAS_MEMORY) {
            smi_buf_printf(&line, "%7llu / %7llu MiB  [", smi_mib_up(d->used_bytes),
                           (unsigned long long)(d->total_bytes >> 20));
            int fill = d->total_bytes ? (int)((double)d->used_bytes / (double)d->total_bytes * BAR_WIDTH + 0.5) : 0;
            if (fill > BAR_WIDTH) fill = BAR_WIDTH;
            for (int i = 0; i < BAR_WIDTH; i++) smi_buf_put(&line, i < fill ? "#" : ".", 1);
            smi_buf_put(&line, "]", 1);
            if (d->memory_version == 1) any_v1 = 1;
        } else {
            smi_buf_printf(&line, "%21s  %-*s", "N/A", BAR_WIDTH + 2, "");
        }
        if (v & VRAM_SMI_HAS_UTILIZATION) smi_buf_printf(&line, "  %3u %%", d->utilization_gpu_pct);
        else smi_buf_printf(&line, "  %5s", "N/A");
        if (v & VRAM_SMI_HAS_TEMPERATURE) smi_buf_printf(&line, "  %3u C", d->temperature_c);
        else smi_buf_printf(&line, "  %5s", "N/A");
        if (v & VRAM_SMI_HAS_POWER) smi_buf_printf(&line, "  %4.0f W", d->power_mw / 1000.0);
        else smi_buf_printf(&line, "  %6s", "N/A");
        if (v & VRAM_SMI_HAS_POWER_LIMIT) smi_buf_printf(&line, " / %4.0f W", d->power_limit_mw / 1000.0);
        else smi_buf_printf(&line, " / %s", "N/A");
        emit(b, &line, o);
        if (o->history && o->history[g] && o->hist_len) {
            smi_buf_printf(&line, "     memory history ");
            double lo, hi;
            spark(&line, o->history[g], o->hist_len, o->utf8, &lo, &hi);
            if (hi >= 0) smi_buf_printf(&line, "  %.1f-%.1f %%", 100.0 * lo, 100.0 * hi);
            emit(b, &line, o);
        }
    }
    if (any_v1) {
        smi_buf_printf(&line, "(old driver: memory used includes the driver's reservation)");
        emit(b, &line, o);
    }
    emit(b, &line, o);
    smi_buf_printf(&line, "%3s  %8s  %-4s %-12s %12s  %s", "GPU", "PID", "TYPE", "USER", "MEMORY", "COMMAND");
    emit(b, &line, o);
    size_t shown = 0;
    for (size_t g = 0; g < s->count; g++) {
        const vram_smi_device *d = &s->devs[g];
        if (d->nvml_error) continue;
        if (!(d->valid & VRAM_SMI_HAS_PROCESSES)) {
            smi_buf_printf(&line, "%3u  processes: N/A (not supported)", d->index);
            emit(b, &line, o);
            shown++;
            continue;
        }
        for (size_t i = 0; i < d->process_count; i++) {
            const vram_smi_process *p = &d->processes[i];
            const char *type = (p->kinds & VRAM_SMI_PROCESS_COMPUTE) && (p->kinds & VRAM_SMI_PROCESS_GRAPHICS) ? "C+G"
                               : (p->kinds & VRAM_SMI_PROCESS_GRAPHICS)                                         ? "G"
                                                                                                                : "C";
            char mem[32];
            if (p->memory_known) snprintf(mem, sizeof mem, "%llu MiB", smi_mib_up(p->used_bytes));
            else snprintf(mem, sizeof mem, "unknown");
            smi_buf_printf(&line, "%3u  %8u  %-4s %-12.12s %12s  %s", d->index, p->pid, type, p->user[0] ? p->user : "?",
                           mem, p->command[0] ? p->command : "?");
            emit(b, &line, o);
            shown++;
        }
    }
    if (!shown) {
        smi_buf_printf(&line, "     no processes are using the GPU%s", s->count == 1 ? "" : "s");
        emit(b, &line, o);
    }
    smi_buf_free(&line);
}

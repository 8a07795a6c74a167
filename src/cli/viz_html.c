/* viz_html.c — the page of `vram viz`: the template (src/cli/viz/page.html, style.css and the
 * scripts, embedded at build time as C arrays by cmake/embed_viz.cmake) with the inputs' data.
 *
 * The template holds markers /\*@NAME@*\/ that are replaced in order: TITLE (HTML-escaped),
 * FILE:name (an embedded file: the style and the scripts), META (a JSON array, one object per
 * input: names, counters, steps, tags, stacks, and where each array lies in the data) and DATA
 * (one <script type="application/octet-stream"> per input holding its arrays, little-endian,
 * each 8-byte aligned, base64-encoded), so a million events cost bytes, not JSON objects, and
 * the page decodes them into typed arrays.
 */
#include <stdio.h>
#include <string.h>

#include "viz_model.h"

/* The embedded files (viz_assets.c, generated), ended by a NULL name. */
extern const struct vram_viz_asset {
    const char *name, *data;
    size_t len;
} vram_viz_assets[];

static const struct vram_viz_asset *asset(const char *name, size_t len) {
    for (const struct vram_viz_asset *a = vram_viz_assets; a->name; a++)
        if (strlen(a->name) == len && !memcmp(a->name, name, len)) return a;
    return NULL;
}

typedef struct viz_array {
    const char *name, *type;
    const void *data;
    size_t count, elem;
} viz_array;

/* The arrays of m, in the order they lie in its data. */
static size_t model_arrays(const viz_model *m, viz_array out[16]) {
    size_t n = 0;
    out[n++] = (viz_array){"ev", "u32", m->ev, m->n_events, 4};
    if (m->time_us) out[n++] = (viz_array){"time", "f64", m->time_us, m->n_events, 8};
    out[n++] = (viz_array){"req", "f64", m->req, m->n_allocs, 8};
    out[n++] = (viz_array){"blk", "f64", m->blk, m->n_allocs, 8};
    out[n++] = (viz_array){"addr", "f64", m->addr, m->n_allocs, 8};
    out[n++] = (viz_array){"aEv", "i32", m->a_ev, m->n_allocs, 4};
    out[n++] = (viz_array){"fEv", "i32", m->f_ev, m->n_allocs, 4};
    out[n++] = (viz_array){"stack", "i32", m->stack, m->n_allocs, 4};
    out[n++] = (viz_array){"stream", "u16", m->stream, m->n_allocs, 2};
    out[n++] = (viz_array){"tag", "u8", m->tag, m->n_allocs, 1};
    out[n++] = (viz_array){"resEv", "i32", m->res_ev, m->n_res, 4};
    out[n++] = (viz_array){"resVal", "f64", m->res_val, m->n_res, 8};
    out[n++] = (viz_array){"segEv", "i32", m->seg_ev, m->n_seg, 4};
    out[n++] = (viz_array){"segAddr", "f64", m->seg_addr, m->n_seg, 8};
    out[n++] = (viz_array){"segSize", "f64", m->seg_size, m->n_seg, 8};
    return n;
}

/* A JSON string safe inside <script>: '<' as \u003c, so no "</script>" can end the block. */
static void put_json_piece(void *sink, const char *bytes, size_t n) {
    FILE *f = sink;
    for (size_t i = 0; i < n; i++) {
        if (bytes[i] == '<') fputs("\\u003c", f);
        else fputc(bytes[i], f);
    }
}

static void json_str(FILE *f, const char *s) { vram_json_escape(s ? s : "", (size_t)-1, put_json_piece, f); }

static void html_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

static void write_meta_one(FILE *f, const viz_model *m) {
    fputs("{\"name\":", f);
    json_str(f, m->name);
    fprintf(f, ",\"kind\":\"%s\",\"note\":", m->kind);
    json_str(f, m->note);
    fprintf(f,
            ",\"nEvents\":%zu,\"nAllocs\":%zu,\"alloc0\":%.0f,\"reserved0\":%.0f,\"peakAllocated\":%.0f,"
            "\"peakReserved\":%.0f,\"finalAllocated\":%.0f,\"finalReserved\":%.0f,\"exactHistory\":%s,\"tags\":[",
            m->n_events, m->n_allocs, m->alloc0, m->reserved0, m->peak_allocated, m->peak_reserved, m->final_allocated,
            m->final_reserved, m->exact_history ? "true" : "false");
    for (int i = 0; i < m->n_tags; i++) {
        if (i) fputc(',', f);
        json_str(f, m->tag_names[i]);
    }
    fputs("],\"steps\":[", f);
    for (size_t i = 0; i < m->n_steps; i++) {
        fprintf(f, "%s[%d,", i ? "," : "", m->step_ev[i]);
        json_str(f, m->step_label[i]);
        fputc(']', f);
    }
    fputs("],\"stacks\":[", f);
    for (size_t i = 0; i < m->n_stacks; i++) {
        if (i) fputc(',', f);
        json_str(f, m->stacks[i]);
    }
    fputs("],\"arrays\":{", f);
    viz_array arr[16];
    size_t n = model_arrays(m, arr), offset = 0;
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s\"%s\":[\"%s\",%zu,%zu]", i ? "," : "", arr[i].name, arr[i].type, offset, arr[i].count);
        offset += (arr[i].count * arr[i].elem + 7) / 8 * 8;
    }
    fputs("}}", f);
}

typedef struct b64 {
    FILE *f;
    unsigned char pend[3];
    int npend;
    char line[4096 + 4];
    size_t nline;
} b64;

static void b64_flush_line(b64 *b) {
    fwrite(b->line, 1, b->nline, b->f);
    b->nline = 0;
}

static void b64_quad(b64 *b, const unsigned char *p, int n) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t v = (uint32_t)p[0] << 16 | (uint32_t)(n > 1 ? p[1] : 0) << 8 | (n > 2 ? p[2] : 0);
    char *o = b->line + b->nline;
    o[0] = abc[v >> 18 & 63];
    o[1] = abc[v >> 12 & 63];
    o[2] = n > 1 ? abc[v >> 6 & 63] : '=';
    o[3] = n > 2 ? abc[v & 63] : '=';
    b->nline += 4;
    if (b->nline >= 4096) b64_flush_line(b);
}

static void b64_put(b64 *b, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n && b->npend) { /* finish a partial group first */
        b->pend[b->npend++] = *p++;
        n--;
        if (b->npend == 3) {
            b64_quad(b, b->pend, 3);
            b->npend = 0;
        }
    }
    for (; n >= 3; p += 3, n -= 3) b64_quad(b, p, 3);
    while (n--) b->pend[b->npend++] = *p++;
}

static void b64_end(b64 *b) {
    if (b->npend) b64_quad(b, b->pend, b->npend);
    b->npend = 0;
    b64_flush_line(b);
}

static void write_data(FILE *f, viz_model *const *models, size_t n) {
    static const unsigned char zeros[8] = {0};
    for (size_t k = 0; k < n; k++) {
        fprintf(f, "<script type=\"application/octet-stream\" id=\"vram-data-%zu\">", k);
        b64 b = {.f = f};
        viz_array arr[16];
        size_t na = model_arrays(models[k], arr);
        for (size_t i = 0; i < na; i++) {
            size_t bytes = arr[i].count * arr[i].elem;
            if (bytes) b64_put(&b, arr[i].data, bytes);
            b64_put(&b, zeros, (8 - bytes % 8) % 8);
        }
        b64_end(&b);
        fputs("</script>\n", f);
    }
}

vram_status viz_html_write(viz_model *const *models, size_t n, const char *title, FILE *out) {
    const struct vram_viz_asset *page = asset("page.html", 9);
    if (!page) return vram_error(VRAM_ERR_INTERNAL, "viz: the page template is not in this build");
    const char *p = page->data, *end = page->data + page->len;
    while (p < end) {
        const char *mk = strstr(p, "/*@");
        if (!mk || mk >= end) mk = end;
        fwrite(p, 1, (size_t)(mk - p), out);
        if (mk == end) break;
        const char *close = strstr(mk, "@*/");
        if (!close) return vram_error(VRAM_ERR_INTERNAL, "viz: unclosed marker in the page template");
        size_t len = (size_t)(close - mk - 3);
        const char *name = mk + 3;
        if (len == 5 && !memcmp(name, "TITLE", 5)) html_text(out, title);
        else if (len > 5 && !memcmp(name, "FILE:", 5) && asset(name + 5, len - 5)) {
            const struct vram_viz_asset *a = asset(name + 5, len - 5);
            fwrite(a->data, 1, a->len, out);
        }
        else if (len == 4 && !memcmp(name, "DATA", 4)) write_data(out, models, n);
        else if (len == 4 && !memcmp(name, "META", 4)) {
            fputc('[', out);
            for (size_t k = 0; k < n; k++) {
                if (k) fputc(',', out);
                write_meta_one(out, models[k]);
            }
            fputc(']', out);
        } else return vram_error(VRAM_ERR_INTERNAL, "viz: unknown marker '%.*s' in the page template", (int)len, name);
        p = close + 3;
    }
    return VRAM_OK;
}

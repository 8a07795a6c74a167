/* viz_categories.c — `vram viz` of the categories JSON that `python -m vram_torch run
 * --categories` writes (python/vram_torch/category_report.py: "format": "vram_torch categories
 * v1"): memory by category per step and phase of a PyTorch program.
 *
 * That record holds, per step and phase, the moment allocated memory peaked (with the bytes of
 * each category then) and the phase's peak of reserved memory; no single allocations. It is drawn
 * as a sequence of moments, one per phase in step order: at each, the blocks of the moment before
 * are freed and one block per category is allocated with that category's bytes at the phase's
 * peak, laid end to end in one reserved range of the phase's peak reserved bytes (the rest of it
 * the reserved-but-free memory). A dashed line with "step N phase" marks each moment. The
 * timeline's height at a moment is therefore the phase's peak allocated, its stack the categories
 * at that peak, and its red line the phase's peak reserved; the page's note says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz_json.h"
#include "viz_model.h"

#define VIZ_CATEGORIES_FORMAT "vram_torch categories v1"

/* The record's category names, with the allocator's tag names the other inputs are coloured by. */
static const char *const k_categories[][2] = {
    {"parameters", "parameter"},   {"buffers", "buffer"},       {"gradients", "gradient"},
    {"optimizer_state", "optimizer_state"}, {"activations", "activation"}, {"temporaries", "temporary"},
    {"other", "other"},            {"kv_cache", "kv_cache"},    {"user_tags", "user tags"}};
static const char *const k_phases[] = {"other", "forward", "backward", "optimizer"};

int viz_is_categories(const char *text, size_t len) {
    const char *needle = "\"" VIZ_CATEGORIES_FORMAT "\"";
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len && i < 4096; i++)
        if (!memcmp(text + i, needle, n)) return 1;
    return 0;
}

/* One moment: frees `open` (the moment before's blocks), then a block per category of `w`'s
 * at_peak_allocated, in one range of its peak_reserved bytes at `base`. */
static vram_status moment(viz_model *m, const viz_json_doc *d, const viz_json *w, const char *label, uint32_t *open,
                          size_t *n_open, double *base, double *last_range) {
    const viz_json *at = viz_json_get(d, w, "at_peak_allocated");
    double peak = viz_json_num(d, w, "peak_allocated", -1), reserved = viz_json_num(d, w, "peak_reserved", -1);
    if (!at || at->type != VIZ_JSON_OBJ || peak < 0 || reserved < peak)
        return vram_error(VRAM_ERR_PARSE, "%s: %s: not a phase record (at_peak_allocated, peak_allocated, "
                          "peak_reserved >= peak_allocated)", m->name, label);
    vram_status st = viz_model_step(m, (int32_t)m->n_events, label);
    for (size_t k = 0; k < *n_open && st == VRAM_OK; k++) {
        m->f_ev[open[k]] = (int32_t)m->n_events;
        m->final_allocated -= m->blk[open[k]];
        st = viz_model_event(m, open[k], 1, -1);
    }
    *n_open = 0;
    /* the range moves to the next addresses, so that the layout view shows one range a moment */
    int32_t ev = (int32_t)m->n_events;
    if (st == VRAM_OK && *last_range > 0) st = viz_model_segment(m, ev, *base - *last_range, -*last_range);
    if (st == VRAM_OK) st = viz_model_segment(m, ev, *base, reserved);
    if (st == VRAM_OK) st = viz_model_reserved(m, ev, reserved);
    double addr = *base, sum = 0;
    for (size_t c = 0; c < sizeof k_categories / sizeof k_categories[0] && st == VRAM_OK; c++) {
        double bytes = viz_json_num(d, at, k_categories[c][0], 0);
        if (bytes <= 0) continue;
        uint8_t tag;
        uint32_t idx;
        if ((st = viz_model_tag(m, k_categories[c][1], &tag)) != VRAM_OK) break;
        if ((st = viz_model_alloc(m, bytes, bytes, addr, (int32_t)m->n_events, 0, tag, -1, &idx)) != VRAM_OK) break;
        st = viz_model_event(m, idx, 0, -1);
        open[(*n_open)++] = idx;
        addr += bytes;
        sum += bytes;
        m->final_allocated += bytes;
    }
    if (st == VRAM_OK && sum != peak)
        return vram_error(VRAM_ERR_PARSE, "%s: %s: the categories add up to %.0f bytes, the peak is %.0f", m->name, label,
                          sum, peak);
    if (sum > m->peak_allocated) m->peak_allocated = sum;
    if (reserved > m->peak_reserved) m->peak_reserved = reserved;
    m->final_reserved = reserved;
    *last_range = reserved;
    *base += reserved;
    return st;
}

vram_status viz_model_from_categories(const char *path, const char *text, size_t len, viz_model *m) {
    viz_json_doc d;
    vram_status st = viz_json_parse(text, len, path, &d);
    if (st != VRAM_OK) return st;
    m->kind = "categories";
    m->exact_history = 1;
    const viz_json *root = viz_json_node(&d, 0), *steps = viz_json_get(&d, root, "steps");
    if (!steps || steps->type != VIZ_JSON_ARR || !steps->count)
        st = vram_error(VRAM_ERR_PARSE, "%s: a categories record without steps: nothing to draw", path);
    uint32_t open[sizeof k_categories / sizeof k_categories[0]];
    size_t n_open = 0;
    double base = 1 << 21, last_range = 0;
    for (long s = st == VRAM_OK ? steps->first : -1; s >= 0 && st == VRAM_OK; s = d.nodes[s].next) {
        const viz_json *step = &d.nodes[s], *phases = viz_json_get(&d, step, "phases");
        if (!phases || phases->type != VIZ_JSON_OBJ) {
            st = vram_error(VRAM_ERR_PARSE, "%s: a step without phases", path);
            break;
        }
        for (size_t p = 0; p < sizeof k_phases / sizeof k_phases[0] && st == VRAM_OK; p++) {
            const viz_json *w = viz_json_get(&d, phases, k_phases[p]);
            if (!w) continue;
            char label[96];
            snprintf(label, sizeof label, "step %.0f %s", viz_json_num(&d, step, "step", 0), k_phases[p]);
            st = moment(m, &d, w, label, open, &n_open, &base, &last_range);
        }
    }
    if (st == VRAM_OK && !m->n_events) st = vram_error(VRAM_ERR_PARSE, "%s: no phase has memory: nothing to draw", path);
    char note[512];
    snprintf(note, sizeof note, "vram_torch categories: one moment per phase of each step, drawn at the phase's peak of "
             "allocated memory (the categories then) and of reserved memory; %zu moments", m->n_steps);
    if (st == VRAM_OK && !(m->note = strdup(note))) st = vram_error(VRAM_ERR_HOST_MEMORY, "host out of memory");
    if (st == VRAM_OK) st = viz_model_check(m);
    viz_json_free(&d);
    return st;
}

/* viz_model.h — what `vram viz` draws, as flat arrays: one input (a memtrace replayed through
 * the allocator, or a snapshot's history) turned into events, allocations, reserved-memory
 * changes and segment (or page) ranges, which viz_html.c writes into the page as typed arrays.
 *
 * Events are numbered 0..n_events-1; ev[i] = (allocation << 1) | is_free. Every allocation has
 * its requested bytes, its block's bytes (what the allocator's allocated counter moved by), its
 * address, the events that allocated and freed it (-1: before the first event / never), its
 * stream, tag and stack (-1: none). Allocated memory after event i is alloc0 plus the blocks
 * allocated minus those freed up to i; reserved memory is reserved0, then res_val[k] from event
 * res_ev[k] on. Segments: a signed multiset of address ranges (+ mapped, - unmapped) applied at
 * seg_ev (-1: before the first event); the ranges covered at a moment are the reserved memory
 * there, which the page sweeps to draw the allocator's layout.
 */
#ifndef VRAM_VIZ_MODEL_H
#define VRAM_VIZ_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "vram/vram.h"

#define VIZ_MAX_TAGS 64

typedef struct viz_model {
    char *name; /* the input's file name */
    const char *kind; /* "memtrace" or "snapshot" */
    char *note;       /* how the figures were made (device, conf), shown under the title */

    size_t n_events, cap_events;
    uint32_t *ev;
    double *time_us; /* per event, or NULL (memtraces have no times) */

    size_t n_allocs, cap_allocs;
    double *req, *blk, *addr;
    int32_t *a_ev, *f_ev, *stack;
    uint16_t *stream;
    uint8_t *tag;

    double alloc0, reserved0;
    size_t n_res, cap_res;
    int32_t *res_ev;
    double *res_val;

    size_t n_seg, cap_seg;
    int32_t *seg_ev;
    double *seg_addr, *seg_size;

    size_t n_steps, cap_steps;
    int32_t *step_ev; /* the step begins with this event */
    char **step_label;

    char *tag_names[VIZ_MAX_TAGS];
    int n_tags;
    size_t n_stacks, cap_stacks;
    char **stacks; /* "frame\nframe\n..." innermost first */

    /* The allocator's own counters, as the exporter read them: checked against the arrays before
     * the page is written, and shown by the page. */
    double peak_allocated, peak_reserved, final_allocated, final_reserved;
    int exact_history; /* 1: every allocated figure is the counter's; 0: exact at the end only */
} viz_model;

void viz_model_free(viz_model *m);
/* Appends; each returns VRAM_ERR_OUT_OF_MEMORY when the host has no memory left. */
vram_status viz_model_event(viz_model *m, uint32_t alloc, int is_free, double time_us);
vram_status viz_model_alloc(viz_model *m, double req, double blk, double addr, int32_t a_ev, uint16_t stream,
                            uint8_t tag, int32_t stack, uint32_t *index);
vram_status viz_model_reserved(viz_model *m, int32_t ev, double value);
vram_status viz_model_segment(viz_model *m, int32_t ev, double addr, double size);
vram_status viz_model_step(viz_model *m, int32_t ev, const char *label);
vram_status viz_model_stack(viz_model *m, const char *text, int32_t *index);
/* The tag's index, registering `name` when new (at most VIZ_MAX_TAGS). */
vram_status viz_model_tag(viz_model *m, const char *name, uint8_t *index);

/* Checks that the arrays agree with the counters (the page draws the arrays): allocated and
 * reserved at the end, their peaks, every free after its allocation. VRAM_ERR_INTERNAL naming
 * the first disagreement. */
vram_status viz_model_check(const viz_model *m);

/* Builders (viz_trace.c, viz_snapshot.c). */
typedef struct viz_trace_options {
    const char *device; /* NULL: sim */
    uint64_t capacity;  /* 0: 80 GiB */
    const char *conf;
} viz_trace_options;
vram_status viz_model_from_trace(const char *path, const viz_trace_options *o, viz_model *m);
vram_status viz_model_from_snapshot(const char *path, const char *text, size_t len, viz_model *m);
/* The categories JSON of `python -m vram_torch run --categories` (viz_categories.c), which
 * viz_is_categories tells from its first 4 KiB. */
int viz_is_categories(const char *text, size_t len);
vram_status viz_model_from_categories(const char *path, const char *text, size_t len, viz_model *m);

/* The page (viz_html.c): written to `out` whole. */
vram_status viz_html_write(viz_model *const *models, size_t n, const char *title, FILE *out);

#endif

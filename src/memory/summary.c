/* summary.c — the memory summary table: torch.cuda.memory_summary()'s layout, plus memory
 * by tag.
 *
 * The table reproduces PyTorch's character for character (its field widths, 75-character
 * lines between '|' borders, the order of metrics and rows), so people and scripts that read
 * one read the other. Two details of PyTorch's formatting are kept on purpose:
 *   - a size cell is "{value:6d} {unit}", the unit chosen from the column's "all" row: it
 *     moves up (B, KiB, MiB, GiB, TiB, PiB) while that value is at least 768 KiB-of-the-unit,
 *     and the value is divided with floor division, so 1 GiB prints as "  1024 MiB";
 *   - a count cell is "{value:7d} {K|M| } ", moving up at 750,000.
 * The title says vram. On a CUDA device (real or simulated) the labels stay PyTorch's ("CUDA
 * OOMs", "cudaMalloc retries", "GPU reserved memory"); on the host and the address-space
 * simulator they name what is there ("OOMs", "alloc retries", "Reserved memory"), in the same
 * columns (summary_labels).
 *
 * After PyTorch's table comes vram's own section: for each tag with any activity, its
 * allocated memory, requested memory and allocation count, in the same four columns.
 *
 * The text is built in a memory stream (open_memstream) and handed back as one string.
 */
#include "vram/summary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUMMARY_WIDTH 75

static int64_t floor_div(int64_t v, int64_t d) {
    int64_t q = v / d;
    if ((v % d != 0) && ((v < 0) != (d < 0))) q--;
    return q;
}

/* PyTorch's _format_size: 10 characters. */
static void format_size_cell(char *buf, size_t cap, int64_t value, int64_t pref_value) {
    static const char *units[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double pref = (double)pref_value;
    int u = 0;
    for (int k = 1; k < 6; k++) {
        if (pref < 768.0 * 1024.0) break;
        u = k;
        value = floor_div(value, 1024);
        pref /= 1024.0;
    }
    snprintf(buf, cap, "%6lld %s", (long long)value, units[u]);
}

/* PyTorch's _format_count: 10 characters. */
static void format_count_cell(char *buf, size_t cap, int64_t value, int64_t pref_value) {
    static const char *units[] = {" ", "K", "M"};
    double pref = (double)pref_value;
    int u = 0;
    for (int k = 1; k < 3; k++) {
        if (pref < 750.0 * 1000.0) break;
        u = k;
        value = floor_div(value, 1000);
        pref /= 1000.0;
    }
    snprintf(buf, cap, "%7lld %s ", (long long)value, units[u]);
}

typedef void (*cell_fn)(char *, size_t, int64_t, int64_t);

static void put_rule(FILE *f, char c) {
    fputc('|', f);
    for (int i = 0; i < SUMMARY_WIDTH; i++) fputc(c, f);
    fputs("|\n", f);
}

/* One row: " {name:<21} | c | p | a | f ", each cell's unit chosen from `pref`. */
static void put_row(FILE *f, const char *name, const vram_stat *s, const vram_stat *pref, cell_fn cell) {
    char c[4][48];
    cell(c[0], sizeof c[0], s->current, pref->current);
    cell(c[1], sizeof c[1], s->peak, pref->peak);
    cell(c[2], sizeof c[2], s->allocated, pref->allocated);
    cell(c[3], sizeof c[3], s->freed, pref->freed);
    fprintf(f, "| %-21.21s | %s | %s | %s | %s |\n", name, c[0], c[1], c[2], c[3]);
}

static void put_centered(FILE *f, const char *text) {
    int len = (int)strlen(text);
    if (len > SUMMARY_WIDTH) len = SUMMARY_WIDTH;
    int left = (SUMMARY_WIDTH - len) / 2;
    fprintf(f, "|%*s%.*s%*s|\n", left, "", len, text, SUMMARY_WIDTH - left - len, "");
}

static int tag_active(const vram_tag_stats *t) {
    return t->allocation.allocated || t->allocation.current || t->allocated_bytes.allocated ||
           t->requested_bytes.allocated;
}

/* The words of the table that name the device's memory: PyTorch's on CUDA, plain elsewhere. */
typedef struct summary_labels {
    const char *ooms, *retries;             /* (at most 9 and 18 characters) */
    const char *reserved, *segments, *oversize_segments; /* (at most 21) */
} summary_labels;

static const summary_labels cuda_labels = {"CUDA OOMs", "cudaMalloc retries", "GPU reserved memory",
                                           "GPU reserved segments", "Oversize GPU segments"};
static const summary_labels plain_labels = {"OOMs", "alloc retries", "Reserved memory", "Reserved segments",
                                            "Oversize segments"};

static vram_status summary_text(const vram_stats *stats, const char *const *tag_names, int device_index,
                                int abbreviated, const summary_labels *lb, char **out) {
    if (!stats || !out) return vram_error(VRAM_ERR_INVALID_ARG, "summary: null argument");
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return vram_error(VRAM_ERR_HOST_MEMORY, "summary: host out of memory");

    put_rule(f, '=');
    /* PyTorch: " {_:16} PyTorch CUDA memory summary, device ID {device:<17d} " */
    fprintf(f, "| %16s vram memory summary, device ID %-25d |\n", "", device_index);
    put_rule(f, '-');
    fprintf(f, "|  %9s %9s: %-12llu | %6s %18s: %-8llu  |\n", "", lb->ooms, (unsigned long long)stats->num_ooms, "",
            lb->retries, (unsigned long long)stats->num_alloc_retries);
    put_rule(f, '=');
    fprintf(f, "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");

    const struct {
        size_t offset;
        const char *name;
        int is_size;
    } metrics[] = {
        {offsetof(vram_stats, allocated_bytes), "Allocated memory", 1},
        {offsetof(vram_stats, active_bytes), "Active memory", 1},
        {offsetof(vram_stats, requested_bytes), "Requested memory", 1},
        {offsetof(vram_stats, reserved_bytes), lb->reserved, 1},
        {offsetof(vram_stats, inactive_split_bytes), "Non-releasable memory", 1},
        {offsetof(vram_stats, allocation), "Allocations", 0},
        {offsetof(vram_stats, active), "Active allocs", 0},
        {offsetof(vram_stats, segment), lb->segments, 0},
        {offsetof(vram_stats, inactive_split), "Non-releasable allocs", 0},
    };
    for (size_t m = 0; m < sizeof metrics / sizeof metrics[0]; m++) {
        const vram_stat *arr = (const vram_stat *)((const char *)stats + metrics[m].offset);
        cell_fn cell = metrics[m].is_size ? format_size_cell : format_count_cell;
        put_rule(f, '-');
        put_row(f, metrics[m].name, &arr[VRAM_POOL_ALL], &arr[VRAM_POOL_ALL], cell);
        if (!abbreviated) {
            put_row(f, "      from large pool", &arr[VRAM_POOL_LARGE], &arr[VRAM_POOL_ALL], cell);
            put_row(f, "      from small pool", &arr[VRAM_POOL_SMALL], &arr[VRAM_POOL_ALL], cell);
        }
    }
    put_rule(f, '-');
    put_row(f, "Oversize allocations", &stats->oversize_allocations, &stats->oversize_allocations, format_count_cell);
    put_rule(f, '-');
    put_row(f, lb->oversize_segments, &stats->oversize_segments, &stats->oversize_segments, format_count_cell);
    put_rule(f, '=');

    /* vram's section: memory by tag. */
    uint32_t ntags = stats->num_tags > VRAM_TAG_MAX ? VRAM_TAG_MAX : stats->num_tags;
    int any = 0;
    for (uint32_t i = 0; i < ntags; i++) any |= tag_active(&stats->tags[i]);
    if (any) {
        put_centered(f, "Memory by tag (rows: allocated memory, requested memory, allocations)");
        put_rule(f, '-');
        fprintf(f, "|        Tag            | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");
        for (uint32_t i = 0; i < ntags; i++) {
            const vram_tag_stats *t = &stats->tags[i];
            if (!tag_active(t)) continue;
            char fallback[32];
            const char *name = tag_names && tag_names[i] ? tag_names[i] : NULL;
            if (!name) {
                snprintf(fallback, sizeof fallback, "tag %u", i);
                name = fallback;
            }
            put_rule(f, '-');
            put_row(f, name, &t->allocated_bytes, &t->allocated_bytes, format_size_cell);
            put_row(f, "  requested memory", &t->requested_bytes, &t->allocated_bytes, format_size_cell);
            put_row(f, "  allocations", &t->allocation, &t->allocation, format_count_cell);
        }
        put_rule(f, '=');
    }

    if (fclose(f) != 0 || !text) {
        free(text);
        return vram_error(VRAM_ERR_HOST_MEMORY, "summary: host out of memory");
    }
    *out = text;
    return VRAM_OK;
}

vram_status vram_stats_summary(const vram_stats *stats, const char *const *tag_names, int device_index,
                               int abbreviated, char **out) {
    return summary_text(stats, tag_names, device_index, abbreviated, &cuda_labels, out);
}

vram_status vram_memory_summary(vram_allocator *a, int abbreviated, char **out) {
    if (!a || !out) return vram_error(VRAM_ERR_INVALID_ARG, "summary: null argument");
    vram_stats *s = malloc(sizeof *s);
    if (!s) return vram_error(VRAM_ERR_HOST_MEMORY, "summary: host out of memory");
    vram_allocator_get_stats(a, s);
    const char *names[VRAM_TAG_MAX];
    for (uint32_t i = 0; i < VRAM_TAG_MAX; i++) names[i] = i < s->num_tags ? vram_allocator_tag_name(a, i) : NULL;
    vram_device *dev = vram_allocator_device(a);
    int cuda = dev && (!strcmp(dev->kind, "cuda") || !strcmp(dev->kind, "cudasim"));
    vram_status st = summary_text(s, names, dev ? dev->index : 0, abbreviated, cuda ? &cuda_labels : &plain_labels, out);
    free(s);
    return st;
}

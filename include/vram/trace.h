/* trace.h — allocation traces (memtrace v1): loading, validation, and the parsed form.
 *
 * A memtrace v1 file (docs/trace_format.md) is text, one record a line:
 *
 *   # memtrace v1            first non-blank line, always
 *   # key: value             header lines (source, PyTorch's own peaks for the workload)
 *   a ID SIZE STREAM         allocate SIZE bytes on stream STREAM; ID is new
 *   f ID                     free allocation ID
 *
 * Loading validates the whole trace (unknown or reused ids, bad numbers, unknown records,
 * missing or extra fields, a truncated last line, a line longer than VRAM_TRACE_MAX_LINE
 * bytes) and fails on the first problem with
 * VRAM_ERR_PARSE and a detail naming the line. A loaded trace is a flat array of events in
 * which every allocation id has been replaced by a dense index 0..allocs-1, so a replay keeps
 * its live pointers in a plain array indexed by event.index.
 */
#ifndef VRAM_TRACE_H
#define VRAM_TRACE_H

#include "vram/vram.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_trace vram_trace;

/* The longest line a trace may have, in bytes (records and header lines are far shorter):
 * loading stops reading at a longer one, so input that is or inflates to one endless line is not
 * held whole. */
#define VRAM_TRACE_MAX_LINE (1u << 20)
/* The most text vram_trace_load reads (inflated) unless VRAM_TRACE_MAX_BYTES says otherwise:
 * about 50 million events; more is refused with a message naming the variable. */
#define VRAM_TRACE_DEFAULT_MAX_BYTES (1ull << 30)

typedef enum vram_trace_op {
    VRAM_TRACE_ALLOC = 0,
    VRAM_TRACE_FREE = 1
} vram_trace_op;

/* One record. 16 bytes, so a replay streams through them. */
typedef struct vram_trace_event {
    uint64_t size;   /* requested bytes (for a free: the size of the allocation it frees) */
    uint32_t index;  /* dense allocation index, 0..vram_trace_num_allocs()-1 */
    uint16_t stream; /* the trace's stream number (0 = default stream) */
    uint8_t op;      /* vram_trace_op */
    uint8_t reserved_;
} vram_trace_event;

/* Whether record e allocates no memory: a request for 0 bytes, an empty tensor, which PyTorch's
 * allocator serves with a null pointer and counts nowhere (and so does vram_torch, whose plug-in
 * returns NULL for it: src/torch/plugin.cpp); a replay of a PyTorch trace skips it, and its free,
 * which frees NULL, too. */
static inline int vram_trace_event_empty(const vram_trace_event *e) { return e->op == VRAM_TRACE_ALLOC && e->size == 0; }

/* Loads a trace from `path`: a plain file, a gzip file or "-" for standard input (plain or gzip,
 * told by its magic bytes; gzip through zlib where the build has it, else the built-in decoder). */
vram_status vram_trace_load(const char *path, vram_trace **out);

/* Parses a trace held in memory (`len` bytes, need not be NUL-terminated). `name` is used in
 * error details (may be NULL). */
vram_status vram_trace_parse(const char *text, size_t len, const char *name, vram_trace **out);

void vram_trace_free(vram_trace *t);

/* The events, in file order. */
const vram_trace_event *vram_trace_events(const vram_trace *t, size_t *count);
size_t vram_trace_num_events(const vram_trace *t);
size_t vram_trace_num_allocs(const vram_trace *t);
size_t vram_trace_num_frees(const vram_trace *t);

/* The 1-based line of event i in the source text (0 if i is out of range). */
uint64_t vram_trace_event_line(const vram_trace *t, size_t i);

/* The original id of allocation `index` as written in the trace. */
uint64_t vram_trace_alloc_id(const vram_trace *t, uint32_t index);

/* Figures computed from the events alone: the most bytes / allocations ever live at once,
 * and the index of the event after which the live bytes first reached that peak. */
uint64_t vram_trace_peak_live_bytes(const vram_trace *t);
uint64_t vram_trace_peak_live_allocs(const vram_trace *t);
size_t vram_trace_peak_live_event(const vram_trace *t);
/* Largest stream number used (0 when every event is on the default stream). */
uint32_t vram_trace_max_stream(const vram_trace *t);

/* The name given at load (the path, "-" or the `name` argument of vram_trace_parse). */
const char *vram_trace_name(const vram_trace *t);

/* Header key/value pairs ("# key: value" lines), in file order. */
size_t vram_trace_header_count(const vram_trace *t);
void vram_trace_header_at(const vram_trace *t, size_t i, const char **key, const char **value);
/* Where header line i lies among the events: how many come before it. A header line may follow
 * events: "# workload: NAME" lines mark where each program of a multi-program trace begins
 * (bench/torch_workloads.py --trace). */
size_t vram_trace_header_event(const vram_trace *t, size_t i);

/* One program of a multi-program trace: its name (the "# workload: NAME" line's value, owned by
 * the trace) and its events [start, end). */
typedef struct vram_trace_workload {
    const char *name;
    size_t start, end;
} vram_trace_workload;

/* The workloads of t, in order, up to `max` of them written to `out`; returns how many the trace
 * has (0 when it has no "# workload:" line: it is one program). A workload ends where the next
 * begins; the last, at the trace's end. */
size_t vram_trace_workloads(const vram_trace *t, vram_trace_workload *out, size_t max);
/* The value for `key`, or NULL when the header lacks it. */
const char *vram_trace_header(const vram_trace *t, const char *key);
/* The value for `key` as an unsigned integer: VRAM_ERR_NOT_FOUND when absent, VRAM_ERR_PARSE
 * when it is not a plain decimal number. */
vram_status vram_trace_header_u64(const vram_trace *t, const char *key, uint64_t *out);

/* Seconds spent reading (I/O and decompression) and parsing the trace at load. */
double vram_trace_read_seconds(const vram_trace *t);
double vram_trace_parse_seconds(const vram_trace *t);
/* Number of lines in the source text. */
uint64_t vram_trace_num_lines(const vram_trace *t);

#ifdef __cplusplus
}
#endif

#endif

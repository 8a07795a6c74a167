/* vram.h — the umbrella header of libvram, and the status codes every module returns.
 *
 * Every function that can fail returns a vram_status: VRAM_OK (0) on success, a negative code
 * otherwise, with its result given through an out-parameter. Beside the code, the failing call
 * leaves a human-readable detail in a thread-local buffer (vram_last_error), e.g.
 * "trace line 17: free of unknown id 42". Library code never aborts or exits on anything a
 * caller or an input can cause: it returns one of these codes.
 */
#ifndef VRAM_VRAM_H
#define VRAM_VRAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vram_status {
    VRAM_OK = 0,
    VRAM_ERR_INVALID_ARG = -1,   /* a bad argument, flag or config value */
    VRAM_ERR_OUT_OF_MEMORY = -2, /* the device or the limit cannot hold the request */
    VRAM_ERR_NOT_FOUND = -3,     /* an unknown pointer, id, device or file */
    VRAM_ERR_NO_DEVICE = -4,     /* no driver or no device of the kind asked for */
    VRAM_ERR_DRIVER = -5,        /* the driver returned an error */
    VRAM_ERR_PARSE = -6,         /* malformed input text (trace, config, number) */
    VRAM_ERR_IO = -7,            /* reading or writing a file failed */
    VRAM_ERR_UNSUPPORTED = -8,   /* the device or build lacks the feature */
    VRAM_ERR_STATE = -9,         /* the call is not valid in the current state (double free) */
    VRAM_ERR_SHAPE = -10,        /* tensor shapes do not match what an op needs */
    VRAM_ERR_INTERNAL = -11,     /* an invariant broke: a bug in vram */
    VRAM_ERR_HOST_MEMORY = -12   /* the host (malloc) ran out: no answer, unlike the device's OOM */
} vram_status;

/* A short fixed name for a status, e.g. "out of memory". */
const char *vram_status_str(vram_status status);

/* The detail message of the last failing call on this thread ("" if none). */
const char *vram_last_error(void);

/* Sets the thread's detail message (printf format) and returns `status`, so library code can
 * write `return vram_error(VRAM_ERR_PARSE, "line %zu: ...", n);`. */
vram_status vram_error(vram_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears the thread's detail message. */
void vram_error_clear(void);

/* Parses a byte size: "512", "64KiB", "1.5GiB", "80GB", "2MB" (KB/MB/GB/TB are powers of 1000,
 * KiB/MiB/GiB/TiB and K/M/G/T powers of 1024). Rejects negative, empty, overflowing input. */
vram_status vram_parse_size(const char *text, uint64_t *out);

/* Formats a byte count as PyTorch's OOM message does, except that bytes are whole and each
 * unit starts at 1 of it: "0 bytes", "1 byte", "1.50 KiB", "1.00 MiB", "1.25 GiB", "2.00 TiB". Writes at most `cap` bytes into `buf` and returns `buf`. */
char *vram_format_size(uint64_t bytes, char *buf, size_t cap);

/* Writes the first `max` bytes of s (up to its NUL) to f as a JSON string, quoted and escaped;
 * bytes that are not valid UTF-8 become U+FFFD, so the output is valid JSON whatever s holds. */
void vram_json_write_string(FILE *f, const char *s, size_t max);
/* The same, in pieces handed to put(sink, bytes, n) (for output that is not a stdio stream). */
void vram_json_escape(const char *s, size_t max, void (*put)(void *sink, const char *bytes, size_t n), void *sink);

/* Makes s printable in place: control characters (terminal escapes among them) and bytes that
 * are not valid UTF-8 become '?'; valid UTF-8 stays. */
void vram_text_printable(char *s);

#ifdef __cplusplus
}
#endif

#endif

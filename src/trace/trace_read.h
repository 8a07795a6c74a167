/* trace_read.h — what trace.c (parsing) and trace_read.c (reading files) share. */
#ifndef VRAM_TRACE_READ_H
#define VRAM_TRACE_READ_H

#include <stddef.h>

#include "vram/vram.h"

static inline int vram_trace_is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Reads the whole trace at `path` ("-": standard input) into one buffer, inflating gzip data;
 * *name is what messages call it. The caller frees *text. */
vram_status vram_trace_read_text(const char *path, char **text, size_t *len, const char **name);

#endif

/* file_open.h — opening an input file that may not be what its name promises (internal).
 *
 * open() of a FIFO waits for a writer, for ever if none comes, and a device or socket can
 * block a reader the same way, so every input a vram tool reads by name (a trace, the
 * training corpus, VRAM_NVML_LIBRARY) is opened here: without blocking, checked by kind, and
 * only then made a normal blocking descriptor.
 */
#ifndef VRAM_CORE_FILE_OPEN_H
#define VRAM_CORE_FILE_OPEN_H

/* How long a stream (a FIFO or a socket, where streams are allowed) may stay silent before
 * its first byte: a pipe from a program that is starting, not one that nobody writes to. */
#define VRAM_STREAM_FIRST_BYTE_MS 10000

/* Opens `path` for reading. A regular file is always accepted; with streams_ok, also a FIFO
 * or a socket that gives its first byte (or its end) within VRAM_STREAM_FIRST_BYTE_MS, and a
 * character device (e.g. /dev/stdin on a terminal or /dev/null). Returns the descriptor
 * (O_CLOEXEC, blocking), or -1 with errno set by open() and *why NULL, or -1 with *why a
 * phrase such as "is a FIFO, not a regular file" for the caller's message. */
int vram_file_open_read(const char *path, int streams_ok, const char **why);

#endif

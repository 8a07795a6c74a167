/* gunzip.h — the built-in gzip decoder (gunzip.c), internal to libvram: trace.c uses it when
 * the build has no zlib, and tests compare it with zlib. */
#ifndef VRAM_GUNZIP_H
#define VRAM_GUNZIP_H

#include <stdint.h>

#include "vram/vram.h"

/* Decompresses the gzip data in[0..inlen) (one or more members) into a new malloc'ed buffer
 * (*out, *outlen; freed by the caller). Corrupt or truncated input, and a CRC or length
 * mismatch, give VRAM_ERR_PARSE naming `name`. */
vram_status vram_gunzip(const uint8_t *in, size_t inlen, const char *name, uint8_t **out, size_t *outlen);

/* The same, asking enough(output so far, its length, ctx) each time the output outgrows its
 * buffer (at 1 MiB, then at every doubling): a non-zero answer stops decoding there, and the
 * output so far comes back with VRAM_OK, unchecked (its member's CRC not reached). trace.c stops
 * so at a line too long to be a trace's, so that data inflating to one endless line is not
 * inflated whole. */
typedef int (*vram_gunzip_enough)(const uint8_t *out, size_t len, void *ctx);
vram_status vram_gunzip_until(const uint8_t *in, size_t inlen, const char *name, vram_gunzip_enough enough, void *ctx,
                              uint8_t **out, size_t *outlen);

#endif

/* fuzz_gzload.c — fuzz target for loading gzip-compressed traces: the two gzip readers against
 * each other.
 *
 * The input is written to an in-memory file and loaded with vram_trace_load (in a zlib build,
 * zlib's inflate with trace.c's rules for what follows the last member; without zlib, the
 * built-in decoder), and decoded on its own with the built-in decoder (gunzip.c) and parsed.
 * Any input must load or fail with one status, never crash or leak (ASan/UBSan in the fuzz
 * builds), and for gzip data the two readers must agree: the built-in decoder and the parser
 * accept it exactly when the loader does, with the same events. Input that is no gzip data is
 * only required not to crash. Violations trap, which the fuzzer reports.
 *
 * Seeds: corpus_gzload/ (small traces gzip-compressed: one and two members, a file name in the
 * header, stored blocks, zero padding).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/trace/gunzip.h"
#include "vram/trace.h"

#define REQUIRE(c)                  \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz_gzload", 0);
    if (fd < 0) return 0;
    for (size_t at = 0; at < size;) {
        ssize_t n = write(fd, data + at, size - at);
        if (n <= 0) {
            close(fd);
            return 0;
        }
        at += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    vram_trace *loaded = NULL;
    vram_status ls = vram_trace_load(path, &loaded);
    close(fd);
    REQUIRE((ls == VRAM_OK) == (loaded != NULL));
    REQUIRE(ls == VRAM_OK || ls == VRAM_ERR_PARSE || ls == VRAM_ERR_OUT_OF_MEMORY);
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        uint8_t *plain = NULL;
        size_t plain_len = 0;
        vram_trace *parsed = NULL;
        vram_status gs = vram_gunzip(data, size, "fuzz", &plain, &plain_len);
        if (gs == VRAM_OK) gs = vram_trace_parse((const char *)plain, plain_len, "fuzz", &parsed);
        free(plain);
        REQUIRE((gs == VRAM_OK) == (ls == VRAM_OK)); /* the readers agree on what they accept */
        if (parsed && loaded) REQUIRE(vram_trace_num_events(parsed) == vram_trace_num_events(loaded));
        vram_trace_free(parsed);
    }
    vram_trace_free(loaded);
    return 0;
}

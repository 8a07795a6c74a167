/* fuzz_config.c — fuzz target for VRAM_ALLOC_CONF: parsing, and formatting what it accepts.
 *
 * Any string must either parse, or give VRAM_ERR_INVALID_ARG with a detail that starts
 * "VRAM_ALLOC_CONF" and leave the configuration exactly as it was. What parses must format
 * within VRAM_ALLOC_CONF_FORMAT_MAX bytes into a string that parses back, from the defaults, to
 * the same configuration (vram_alloc_config_format's promise: snapshots and `vram replay` print
 * it for a user to paste back). Violations trap, which the fuzzer reports.
 *
 * Built as a libFuzzer binary with -DVRAM_FUZZ=ON under clang; driver.c runs it over the seeds
 * (corpus_config/) plus bounded random mutations in every `make test`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vram/config.h"

#define REQUIRE(c)                  \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char text[4200];
    if (size >= sizeof text) size = sizeof text - 1;
    memcpy(text, data, size);
    text[size] = '\0'; /* the parser reads a C string: it ends at the first NUL */
    vram_alloc_config cfg, before;
    vram_alloc_config_default(&cfg);
    before = cfg;
    vram_status st = vram_alloc_config_parse(text, &cfg);
    if (st != VRAM_OK) {
        REQUIRE(st == VRAM_ERR_INVALID_ARG);
        REQUIRE(strncmp(vram_last_error(), "VRAM_ALLOC_CONF", 15) == 0);
        REQUIRE(memcmp(&cfg, &before, sizeof cfg) == 0);
        return 0;
    }
    char out[VRAM_ALLOC_CONF_FORMAT_MAX + 1];
    memset(out, 'x', sizeof out);
    vram_alloc_config_format(&cfg, out, VRAM_ALLOC_CONF_FORMAT_MAX + 1);
    REQUIRE(strlen(out) < VRAM_ALLOC_CONF_FORMAT_MAX); /* fits with its NUL */
    vram_alloc_config again;
    vram_alloc_config_default(&again);
    REQUIRE(vram_alloc_config_parse(out, &again) == VRAM_OK);
    REQUIRE(memcmp(&cfg, &again, sizeof cfg) == 0);
    return 0;
}

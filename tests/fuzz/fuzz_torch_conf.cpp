/* fuzz_torch_conf.cpp — fuzz target for PyTorch's allocator settings as the plug-in reads them
 * (src/torch/torch_conf.cpp: PYTORCH_CUDA_ALLOC_CONF, _set_allocator_settings).
 *
 * Any string (cut at its first NUL, as an environment variable is) must either apply, or give
 * VRAM_ERR_INVALID_ARG with a detail that names the source and leave the configuration exactly
 * as it was. What applies must be a configuration vram itself accepts: formatted, it parses back
 * from the defaults to the same string; notes, if any, name the source; merged with itself
 * (torch_conf_merge) it sets the same. Violations trap, which the
 * fuzzer reports. Built like the C targets (tests/fuzz/CMakeLists.txt), with torch_conf.cpp.
 *
 * regress_torch_conf/last_value_left_out: a roundup list vram applies, given again later as one it
 * leaves out; applied in order the first stayed in force, merged only the last counted. Now an
 * option given twice counts once, with its last value, either way.
 */
#include <cstdint>
#include <cstring>
#include <string>

#include "torch_conf.h"

#define REQUIRE(c)                  \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string text(reinterpret_cast<const char *>(data), size);
    text = text.substr(0, text.find('\0'));
    const char *source = "PYTORCH_CUDA_ALLOC_CONF";
    vram_alloc_config cfg, before;
    vram_alloc_config_default(&cfg);
    before = cfg;
    std::string notes;
    vram_status st = torch_conf_apply(source, text, &cfg, &notes);
    if (st != VRAM_OK) {
        REQUIRE(st == VRAM_ERR_INVALID_ARG);
        REQUIRE(strncmp(vram_last_error(), source, strlen(source)) == 0);
        REQUIRE(memcmp(&cfg, &before, sizeof cfg) == 0);
        return 0;
    }
    REQUIRE(notes.empty() || notes.compare(0, strlen(source), source) == 0);
    char out[VRAM_ALLOC_CONF_FORMAT_MAX], again[VRAM_ALLOC_CONF_FORMAT_MAX];
    vram_alloc_config_format(&cfg, out, sizeof out);
    vram_alloc_config back;
    vram_alloc_config_default(&back);
    REQUIRE(vram_alloc_config_parse(out, &back) == VRAM_OK);
    vram_alloc_config_format(&back, again, sizeof again);
    REQUIRE(strcmp(out, again) == 0);
    /* the string applied twice, as repeated _set_allocator_settings calls keep it (each option
     * once, its last value), sets what it set once */
    vram_alloc_config twice;
    vram_alloc_config_default(&twice);
    std::string merged = torch_conf_merge(text, text), more;
    REQUIRE(torch_conf_apply(source, merged, &twice, &more) == VRAM_OK);
    vram_alloc_config_format(&twice, again, sizeof again);
    REQUIRE(strcmp(out, again) == 0);
    return 0;
}

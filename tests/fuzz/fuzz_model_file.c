/* fuzz_model_file.c — fuzz target for model files from untrusted bytes: .vram files and
 * safetensors, through the loaders `vram generate` and `vram train --resume` use.
 *
 * The input is written to an in-memory file and loaded with vram_lm_load (which tells the two
 * formats apart) and vram_gpt_load; a model that loads runs one forward step of token 0, and an
 * f32 one is quantized (Q8_0 or Q8_R). Every input must load or fail with one status, never crash or leak
 * (ASan/UBSan in the fuzz builds). The host device is capped at 64 MiB, so a header claiming a
 * huge model is an out-of-memory error rather than a slow test. Violations trap.
 *
 * Seeds: corpus_model_file/: a one-layer GPT of width 4 as .vram and as safetensors (made by
 * tests/fuzz/make_model_seeds.py), and the .vram one quantized (`vram quantize --format q8_r`).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vram/alloc.h"
#include "vram/infer.h"

#define REQUIRE(c)                  \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

static vram_runtime *runtime(void) {
    static vram_runtime *rt;
    if (!rt) {
        vram_device *dev = NULL;
        vram_allocator *a = NULL;
        REQUIRE(vram_device_open("host:64MiB", &dev) == VRAM_OK);
        REQUIRE(vram_allocator_new(dev, NULL, &a) == VRAM_OK);
        REQUIRE(vram_runtime_new(a, 1, &rt) == VRAM_OK);
    }
    return rt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz_model_file", 0);
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
    vram_runtime *rt = runtime();
    vram_lm *m = NULL;
    vram_status s = vram_lm_load(rt, path, &m, NULL);
    REQUIRE((s == VRAM_OK) == (m != NULL));
    if (m) {
        vram_kv_cache *c = NULL;
        if (vram_kv_cache_new(m, 1, 1, &c) == VRAM_OK) {
            int32_t tok = 0;
            vram_tensor *lg = NULL;
            vram_status fs = vram_lm_forward(m, c, 0, 1, 1, &tok, 0, &lg);
            REQUIRE((fs == VRAM_OK) == (lg != NULL));
            vram_tensor_free(lg);
            vram_kv_cache_free(c);
        }
        if (vram_lm_format(m) == VRAM_WFMT_F32) (void)vram_lm_quantize(m, size & 1 ? VRAM_WFMT_Q8_R : VRAM_WFMT_Q8_0, NULL);
        vram_lm_free(m);
    }
    vram_gpt *g = NULL;
    s = vram_gpt_load(rt, path, &g, NULL);
    REQUIRE((s == VRAM_OK) == (g != NULL));
    vram_gpt_free(g);
    close(fd);
    return 0;
}

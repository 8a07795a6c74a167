/* test_cudnn_graph.c — the descriptors of VRAM_ATTENTION=cudnn's two graphs (cuda_cudnn_attention.c)
 * built against the installed libcudnn without a GPU: every tensor and operation descriptor of the
 * forward and backward graphs, each attribute set with the name, type and count cuDNN accepts,
 * must finalize, and so must the operation graphs (built here without a handle), in bf16 and f16
 * at small and GPT-2 shapes. What needs a device (the heuristics' engines, the plans, running
 * them) is gpu_test_gpu_cudnn's. Skipped (77) where the build has no cuDNN headers or libcudnn
 * cannot be loaded.
 */
#include <stdio.h>
#include <string.h>

#include "../src/runtime/cuda_rt.h"
#include "check.h"

int main(void) {
    char msg[1024];
    if (vram_cudnn_selfcheck(VRAM_DTYPE_BF16, 2, 64, 2, 0, msg, sizeof msg) < 0) check_skip(msg);
    static const int64_t shapes[][3] = {/* B, T, H */ {1, 1, 1}, {2, 64, 2}, {1, 65, 3}, {4, 128, 4}, {8, 1024, 12}};
    vram_dtype dts[2] = {VRAM_DTYPE_BF16, VRAM_DTYPE_F16};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int with_graph = 0; with_graph < 2; with_graph++) {
                const int64_t *s = shapes[i];
                int r = vram_cudnn_selfcheck(dts[d], s[0], s[1], s[2], with_graph, msg, sizeof msg);
                CHECK(r == 1, "%s B=%lld T=%lld H=%lld%s: %s", vram_dtype_name(dts[d]), (long long)s[0], (long long)s[1],
                      (long long)s[2], with_graph ? " with the operation graphs" : "", msg);
                if (r == 1 && i == 0 && d == 0) printf("%s\n", msg);
            }
    return check_done();
}

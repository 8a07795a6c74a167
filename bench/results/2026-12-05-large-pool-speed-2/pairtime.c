/* pair-path timing: N allocate+free pairs of one size on cudasim, best of 7 rounds of 2M */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "vram/alloc.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    vram_device *dev; vram_allocator *a; void *p;
    if (vram_device_open("cudasim", &dev) != VRAM_OK || vram_allocator_new(dev, NULL, &a) != VRAM_OK) return 1;
    size_t sizes[] = {512, 65536, 1u << 20, 16u << 20, 256u << 20};
    for (int s = 0; s < 5; s++) {
        double best = 1e9;
        for (int r = 0; r < 7; r++) {
            double t0 = now();
            for (int i = 0; i < 2000000; i++) {
                if (vram_allocator_malloc(a, sizes[s], 0, VRAM_TAG_OTHER, &p) != VRAM_OK) return 2;
                vram_allocator_free(a, p);
            }
            double ns = (now() - t0) / 2000000 * 1e9;
            if (ns < best) best = ns;
        }
        printf(" %.2f", best);
    }
    printf("\n");
    vram_allocator_destroy(a); vram_device_close(dev);
    return 0;
}

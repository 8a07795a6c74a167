/* pair-path instruction probe: N allocate+free pairs of one size on cudasim */
#include <stdio.h>
#include <stdlib.h>
#include "vram/alloc.h"
int main(int argc, char **argv) {
    size_t size = argc > 1 ? strtoull(argv[1], 0, 0) : (16u << 20);
    vram_device *dev; vram_allocator *a; void *p;
    if (vram_device_open("cudasim", &dev) != VRAM_OK || vram_allocator_new(dev, NULL, &a) != VRAM_OK) return 1;
    for (int i = 0; i < 200000; i++) {
        if (vram_allocator_malloc(a, size, 0, VRAM_TAG_OTHER, &p) != VRAM_OK) return 2;
        vram_allocator_free(a, p);
    }
    vram_allocator_destroy(a); vram_device_close(dev);
    return 0;
}

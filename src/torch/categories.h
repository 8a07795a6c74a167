/* categories.h — what each block of a PyTorch program is (parameter, gradient, activation, ...),
 * as allocator tags, and windows of per-tag peaks for vram_torch's categories (categories.cpp). */
#ifndef VRAM_TORCH_CATEGORIES_H
#define VRAM_TORCH_CATEGORIES_H

#include <string>

extern "C" {
#include "vram/alloc.h"
}

/* The allocator of a device vram has started on, or NULL (plugin.cpp). */
vram_allocator *plugin_allocator(int device);

namespace categories {
/* The tag a new allocation gets now (vram_torch_set_default_tag; "other" until set). */
vram_tag default_tag();
/* Registers the tags vram_torch adds to the built-in ones ("buffer") on a new allocator, so
 * that every device numbers them alike. */
void on_new_allocator(vram_allocator *a);
/* After a successful allocation on `device`: the window's peaks follow (when windows are on). */
void observe(vram_allocator *a, int device);
/* Lines for an out-of-memory message: the bytes of each category at the failing allocation and
 * the memory reserved but free ("" when categories are off). */
std::string oom_lines(vram_allocator *a);
} // namespace categories

#endif

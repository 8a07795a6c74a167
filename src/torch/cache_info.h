/* cache_info.h — CUDAAllocator::cacheInfo for PyTorch's pluggable allocator object (see
 * cache_info.cpp). Internal to libvram_torch.so. */
#ifndef VRAM_TORCH_CACHE_INFO_H
#define VRAM_TORCH_CACHE_INFO_H

#include <cstddef>
#include <string>

/* Makes the current CUDAPluggableAllocator object answer cacheInfo(device, &largest) with
 * answer(device, &largest) instead of raising. "" when done; else why not, nothing changed. */
std::string patch_cache_info(const char *torch_lib_dir, void (*answer)(int device, size_t *largest));

#endif

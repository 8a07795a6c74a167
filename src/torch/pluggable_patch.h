/* pluggable_patch.h — PyTorch's pluggable allocator object answering, from vram, the methods its
 * C++ callers use and it refuses or drops (see pluggable_patch.cpp). Internal to
 * libvram_torch.so. */
#ifndef VRAM_TORCH_PLUGGABLE_PATCH_H
#define VRAM_TORCH_PLUGGABLE_PATCH_H

#include <cstddef>
#include <string>

struct PluggableAnswers {
    void (*cache_info)(int device, size_t *largest);             /* CUDAAllocator::cacheInfo */
    void (*record_stream)(void *ptr, int device, void *stream);  /* recordStream: a cudaStream_t */
};

/* Makes the current CUDAPluggableAllocator object call `answers` for those methods. "" when every
 * method was answered; else the reason (nothing changed when the object is not one, or no method
 * was found; otherwise the methods left as PyTorch has them). */
std::string patch_pluggable(const char *torch_lib_dir, const PluggableAnswers &answers);

#endif

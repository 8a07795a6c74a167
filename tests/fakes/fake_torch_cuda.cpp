/* fake_torch_cuda.cpp — a stand-in libtorch_cuda.so with what the plug-in's cacheInfo patch
 * looks for (src/torch/cache_info.cpp), for tests/torch_plugin_hooks.cpp: a CUDAAllocator base
 * class and a torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator whose cacheInfo raises
 * as PyTorch's does, c10::cuda::CUDACachingAllocator::allocator pointing at one such object
 * (fake_torch_install), and a caller that goes through the object's vtable as ATen's cuDNN code
 * does (fake_torch_cache_info). Same names, so the same symbols as PyTorch's. */
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#define API __attribute__((visibility("default")))

namespace c10::cuda::CUDACachingAllocator {
struct API CUDAAllocator {
    virtual ~CUDAAllocator() = default;
    virtual void *raw_alloc(size_t bytes) = 0;
    virtual void cacheInfo(int8_t device, size_t *largest) = 0;
    virtual const char *name() = 0;
};
API std::atomic<CUDAAllocator *> allocator;
} // namespace c10::cuda::CUDACachingAllocator

namespace torch::cuda::CUDAPluggableAllocator {
class API CUDAPluggableAllocator : public c10::cuda::CUDACachingAllocator::CUDAAllocator {
  public:
    void *raw_alloc(size_t) override { return nullptr; }
    void cacheInfo(int8_t device, size_t *largest) override;
    const char *name() override { return "pluggable"; }
};

void CUDAPluggableAllocator::cacheInfo(int8_t, size_t *) {
    throw std::runtime_error("CUDAPluggableAllocator does not yet support cacheInfo.");
}
} // namespace torch::cuda::CUDAPluggableAllocator

/* Makes a CUDAPluggableAllocator the current allocator (as change_current_allocator does). */
extern "C" API void fake_torch_install(void) {
    c10::cuda::CUDACachingAllocator::allocator.store(new torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator);
}

/* The current allocator's cacheInfo(device, largest), through its vtable: 0, or -1 if it raised. */
extern "C" API int fake_torch_cache_info(int device, size_t *largest) {
    try {
        c10::cuda::CUDACachingAllocator::allocator.load()->cacheInfo((int8_t)device, largest);
        return 0;
    } catch (const std::exception &) {
        return -1;
    }
}

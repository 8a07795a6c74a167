/* fake_torch_cuda.cpp — a stand-in libtorch_cuda.so with what the plug-in's patch of PyTorch's
 * pluggable allocator object looks for (src/torch/pluggable_patch.cpp), for
 * tests/torch_plugin_hooks.cpp: a CUDAAllocator base class and a
 * torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator whose cacheInfo raises and whose
 * recordStream does nothing, as PyTorch's do; c10::DataPtr and c10::cuda::CUDAStream with their
 * layouts (CUDAStream::stream() gives the stream id as the cudaStream_t);
 * c10::cuda::CUDACachingAllocator::allocator pointing at one such object (fake_torch_install);
 * and callers that go through the object's vtable as ATen's cuDNN code and ProcessGroupNCCL do
 * (fake_torch_cache_info, fake_torch_record_stream). Same names, so the same symbols as
 * PyTorch's. */
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#define API __attribute__((visibility("default")))

namespace c10 {
struct Device {
    int8_t type, index;
};
struct DataPtr { /* c10::DataPtr begins with its data pointer */
    void *data;
    void *context;
    void (*deleter)(void *);
    Device device;
};
struct Stream {
    Device device;
    int64_t id;
};
namespace cuda {
class API CUDAStream {
  public:
    explicit CUDAStream(Stream s) : stream_(s) {}
    void *stream() const;

  private:
    Stream stream_;
};
void *CUDAStream::stream() const { return reinterpret_cast<void *>(static_cast<intptr_t>(stream_.id)); }
} // namespace cuda
} // namespace c10

namespace c10::cuda::CUDACachingAllocator {
struct API CUDAAllocator {
    virtual ~CUDAAllocator() = default;
    virtual void *raw_alloc(size_t bytes) = 0;
    virtual void cacheInfo(int8_t device, size_t *largest) = 0;
    virtual void recordStream(const DataPtr &ptr, CUDAStream stream) = 0;
    virtual const char *name() = 0;
};
API std::atomic<CUDAAllocator *> allocator;
} // namespace c10::cuda::CUDACachingAllocator

namespace torch::cuda::CUDAPluggableAllocator {
class API CUDAPluggableAllocator : public c10::cuda::CUDACachingAllocator::CUDAAllocator {
  public:
    void *raw_alloc(size_t) override { return nullptr; }
    void cacheInfo(int8_t device, size_t *largest) override;
    void recordStream(const c10::DataPtr &ptr, c10::cuda::CUDAStream stream) override;
    const char *name() override { return "pluggable"; }
};

void CUDAPluggableAllocator::recordStream(const c10::DataPtr &, c10::cuda::CUDAStream) {} /* no record_stream_fn */

void CUDAPluggableAllocator::cacheInfo(int8_t, size_t *) {
    throw std::runtime_error("CUDAPluggableAllocator does not yet support cacheInfo.");
}
} // namespace torch::cuda::CUDAPluggableAllocator

/* Makes a CUDAPluggableAllocator the current allocator (as change_current_allocator does). */
extern "C" API void fake_torch_install(void) {
    c10::cuda::CUDACachingAllocator::allocator.store(new torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator);
}

/* The current allocator's recordStream for the block at ptr on stream `id` of `device`, through its
 * vtable, as ProcessGroupNCCL calls it. */
extern "C" API void fake_torch_record_stream(void *ptr, int device, int64_t id) {
    c10::DataPtr dp{ptr, ptr, nullptr, c10::Device{1, (int8_t)device}};
    c10::cuda::CUDACachingAllocator::allocator.load()->recordStream(
        dp, c10::cuda::CUDAStream(c10::Stream{c10::Device{1, (int8_t)device}, id}));
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

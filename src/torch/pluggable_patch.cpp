/* pluggable_patch.cpp — what PyTorch's pluggable allocator object refuses or drops for callers in
 * C++, answered by vram.
 *
 * vram_torch routes from Python what PyTorch's Python calls of a pluggable allocator lack; two
 * methods are called from PyTorch's C++ instead, where no Python route reaches:
 *   - cacheInfo(device, &largest): with torch.backends.cudnn.benchmark = True, ATen's cuDNN code
 *     asks the allocator's largest free block before it benchmarks a convolution's algorithms,
 *     and CUDAPluggableAllocator raises "does not yet support cacheInfo": every convolution in
 *     benchmark mode failed (measured on the H200 with PyTorch 2.11);
 *   - recordStream(data_ptr, stream): ProcessGroupNCCL (unless TORCH_NCCL_AVOID_RECORD_STREAMS)
 *     and other C++ code record the side streams a tensor is used on, and CUDAPluggableAllocator
 *     drops the call unless a record-stream function was set, which only C++ can set: a block
 *     could then be reused while a collective still used it.
 * After vram_torch has swapped its allocator in, the process holds one CUDAPluggableAllocator
 * object, pointed to by c10::cuda::CUDACachingAllocator::allocator. patch_pluggable() gives that
 * object a private copy of its class's vtable in which those slots call vram's answers, each slot
 * found by the address of the method it replaces (no index is assumed), and points the object at
 * the copy. The symbols, the object's class (its vptr is that class's vtable) and the slots are
 * checked first: when the class or object differs nothing changes; a method that cannot be found
 * is left as PyTorch has it, and the returned text says which.
 *
 * The replacements are called as PyTorch calls the methods (the Itanium C++ ABI on x86-64 and
 * AArch64: the object first; c10::DataPtr by reference, which starts with the data pointer;
 * c10::cuda::CUDAStream by value, a trivially copyable {Device: type and index bytes; int64_t
 * StreamId} that travels in two registers, rebuilt here and turned into a cudaStream_t by c10's
 * own CUDAStream::stream()).
 */
#include "pluggable_patch.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

PluggableAnswers g_answers;

/* c10::cuda::CUDAStream's layout: a c10::Stream. */
struct C10Stream {
    int8_t type, index;
    int64_t id;
};
typedef void *(*StreamOfFn)(const C10Stream *self); /* CUDAStream::stream() const */
StreamOfFn g_stream_of;

void cache_info(void *self, int8_t device, size_t *largest) {
    (void)self;
    if (g_answers.cache_info && largest) g_answers.cache_info(device, largest);
}

void record_stream(void *self, void *const *data_ptr, C10Stream stream) {
    (void)self;
    if (g_answers.record_stream && data_ptr && *data_ptr) g_answers.record_stream(*data_ptr, stream.index, g_stream_of(&stream));
}

void *find_in(void *const *handles, int n, const char *symbol) {
    for (int i = 0; i < n; i++)
        if (handles[i])
            if (void *p = dlsym(handles[i], symbol)) return p;
    return nullptr;
}

/* The one slot of table[2 .. slots) holding method (0: none, or more than one). */
size_t slot_of(void *const *table, size_t slots, void *method) {
    size_t slot = 0;
    for (size_t i = 2; method && i < slots; i++) {
        if (table[i] != method) continue;
        if (slot) return 0;
        slot = i;
    }
    return slot;
}

} // namespace

std::string patch_pluggable(const char *torch_lib_dir, const PluggableAnswers &answers) {
    const char *libs[] = {"libtorch_cuda.so", "libc10_cuda.so"};
    void *handles[2] = {};
    for (int i = 0; i < 2; i++) {
        std::string path = std::string(torch_lib_dir ? torch_lib_dir : "") + "/" + libs[i];
        handles[i] = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (!handles[i]) handles[i] = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);
    }
    void *vtable = find_in(handles, 2, "_ZTVN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocatorE");
    auto *current = static_cast<std::atomic<void *> *>(find_in(handles, 2, "_ZN3c104cuda20CUDACachingAllocator9allocatorE"));
    void *cache_info_method = find_in(handles, 2, "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator9cacheInfoEaPm");
    void *record_method = find_in(
        handles, 2,
        "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator12recordStreamERKN3c107DataPtrENS3_4cuda10CUDAStreamE");
    auto stream_of = reinterpret_cast<StreamOfFn>(find_in(handles, 2, "_ZNK3c104cuda10CUDAStream6streamEv"));
    for (void *h : handles)
        if (h) dlclose(h); /* RTLD_NOLOAD handles only add a reference */
    if (!vtable || !current)
        return std::string("PyTorch's CUDAPluggableAllocator not found in ") + (torch_lib_dir ? torch_lib_dir : "(null)");
    Dl_info info;
    void *entry = nullptr;
    if (!dladdr1(vtable, &info, &entry, RTLD_DL_SYMENT)) entry = nullptr;
    const ElfW(Sym) *sym = static_cast<const ElfW(Sym) *>(entry);
    if (!sym || sym->st_size < 3 * sizeof(void *)) return "the size of CUDAPluggableAllocator's vtable is unknown";
    size_t slots = sym->st_size / sizeof(void *);
    void **table = static_cast<void **>(vtable);
    void *object = current->load();
    /* an object's vptr is the vtable's address point: after offset-to-top and type_info */
    if (!object || *static_cast<void ***>(object) != table + 2)
        return "the current CUDA allocator is not a CUDAPluggableAllocator (its vtable differs)";
    size_t cache_slot = answers.cache_info ? slot_of(table, slots, cache_info_method) : 0;
    size_t record_slot = answers.record_stream && stream_of ? slot_of(table, slots, record_method) : 0;
    std::string missing;
    if (answers.cache_info && !cache_slot) missing += "cacheInfo";
    if (answers.record_stream && !record_slot) missing += std::string(missing.empty() ? "" : ", ") + "recordStream";
    if (!cache_slot && !record_slot) return "no CUDAPluggableAllocator method found to answer (" + missing + ")";
    void **copy = static_cast<void **>(malloc(sym->st_size)); /* lives as long as the object: the process */
    if (!copy) return "host out of memory for a vtable";
    memcpy(copy, table, sym->st_size);
    g_answers = answers;
    g_stream_of = stream_of;
    if (cache_slot) copy[cache_slot] = reinterpret_cast<void *>(&cache_info);
    if (record_slot) copy[record_slot] = reinterpret_cast<void *>(&record_stream);
    *static_cast<void ***>(object) = copy + 2;
    return missing.empty() ? "" : "left as PyTorch has them: " + missing;
}

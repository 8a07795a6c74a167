/* cache_info.cpp — CUDAAllocator::cacheInfo for PyTorch's pluggable allocator object.
 *
 * With torch.backends.cudnn.benchmark = True, PyTorch asks the current CUDA allocator for its
 * largest free block before it benchmarks a convolution's algorithms (get_available_workspace in
 * ATen's cuDNN code calls c10::cuda::CUDACachingAllocator::cacheInfo), and PyTorch's
 * CUDAPluggableAllocator answers that by raising "does not yet support cacheInfo": under any
 * pluggable allocator every convolution in benchmark mode fails (measured on the H200 with
 * PyTorch 2.11). The call comes from C++, so vram_torch cannot route it from Python.
 *
 * What this file does instead: after vram_torch has swapped its allocator in, the process holds
 * one CUDAPluggableAllocator object, pointed to by c10::cuda::CUDACachingAllocator::allocator.
 * patch_cache_info() gives that object a private copy of its class's vtable in which the
 * cacheInfo slot calls vram's answer, found by the address of CUDAPluggableAllocator::cacheInfo
 * (no slot index is assumed), and points the object at the copy. Everything is checked first
 * (the symbols exist, the object's vtable is that class's, the slot is found once): when
 * anything differs, nothing is changed and the reason is returned. The answer itself is the
 * plug-in's (plugin.cpp: PyTorch's own rule over vram's figures).
 */
#include "cache_info.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void (*g_answer)(int device, size_t *largest);

/* CUDAPluggableAllocator::cacheInfo(c10::DeviceIndex device, size_t *largestBlock), as a
 * member function is called on x86-64 and AArch64: the object first. */
void cache_info(void *self, int8_t device, size_t *largest) {
    (void)self;
    if (g_answer && largest) g_answer(device, largest);
}

void *find_in(void *const *handles, int n, const char *symbol) {
    for (int i = 0; i < n; i++)
        if (handles[i])
            if (void *p = dlsym(handles[i], symbol)) return p;
    return nullptr;
}

} // namespace

std::string patch_cache_info(const char *torch_lib_dir, void (*answer)(int device, size_t *largest)) {
    const char *libs[] = {"libtorch_cuda.so", "libc10_cuda.so"};
    void *handles[2] = {};
    for (int i = 0; i < 2; i++) {
        std::string path = std::string(torch_lib_dir ? torch_lib_dir : "") + "/" + libs[i];
        handles[i] = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (!handles[i]) handles[i] = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);
    }
    void *vtable = find_in(handles, 2, "_ZTVN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocatorE");
    void *method = find_in(handles, 2, "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator9cacheInfoEaPm");
    auto *current = static_cast<std::atomic<void *> *>(find_in(handles, 2, "_ZN3c104cuda20CUDACachingAllocator9allocatorE"));
    for (void *h : handles)
        if (h) dlclose(h); /* RTLD_NOLOAD handles only add a reference */
    if (!vtable || !method || !current)
        return std::string("PyTorch's CUDAPluggableAllocator symbols not found in ") + (torch_lib_dir ? torch_lib_dir : "(null)");
    Dl_info info;
    void *entry = nullptr;
    if (!dladdr1(vtable, &info, &entry, RTLD_DL_SYMENT)) entry = nullptr;
    const ElfW(Sym) *sym = static_cast<const ElfW(Sym) *>(entry);
    if (!sym || sym->st_size < 3 * sizeof(void *))
        return "the size of CUDAPluggableAllocator's vtable is unknown";
    size_t slots = sym->st_size / sizeof(void *);
    void **table = static_cast<void **>(vtable);
    void *object = current->load();
    /* an object's vptr is the vtable's address point: after offset-to-top and type_info */
    if (!object || *static_cast<void ***>(object) != table + 2)
        return "the current CUDA allocator is not a CUDAPluggableAllocator (its vtable differs)";
    size_t slot = 0;
    for (size_t i = 2; i < slots; i++) {
        if (table[i] != method) continue;
        if (slot) return "CUDAPluggableAllocator::cacheInfo fills two vtable slots";
        slot = i;
    }
    if (!slot) return "CUDAPluggableAllocator::cacheInfo is not in its vtable";
    void **copy = static_cast<void **>(malloc(sym->st_size)); /* lives as long as the object: the process */
    if (!copy) return "host out of memory for a vtable";
    memcpy(copy, table, sym->st_size);
    copy[slot] = reinterpret_cast<void *>(&cache_info);
    g_answer = answer;
    *static_cast<void ***>(object) = copy + 2;
    return "";
}

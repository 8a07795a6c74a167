/* c10_symbols.cpp — c10::OutOfMemoryError and the profiler's memory hooks, found at run time.
 *
 * resolve() is given PyTorch's library folder, finds the already-loaded libc10 / libc10_cuda
 * (and libtorch_*) with RTLD_NOLOAD and looks up c10::Error's constructor, OutOfMemoryError's
 * vtable and type_info, and c10's profiler hooks by their mangled names. throw_oom() then builds
 * a real c10::Error in place and gives it OutOfMemoryError's dynamic type, so that PyTorch's C++
 * frames unwind as for its own allocator's error and Python sees torch.OutOfMemoryError. The
 * hooks are atomic pointers: allocations on other threads read them while resolve() runs.
 */
#include "c10_symbols.h"

#include <atomic>
#include <cstring>
#include <cxxabi.h>
#include <dlfcn.h>
#include <stdexcept>
#include <typeinfo>

#include "vram/stats.h"

namespace c10_symbols {
namespace {

/* c10::OutOfMemoryError, resolved at run time from the libraries PyTorch has loaded. */
struct C10SourceLocation {
    const char *function;
    const char *file;
    uint32_t line;
};
typedef void (*C10ErrorCtor)(void *self, C10SourceLocation loc, std::string msg);

struct C10Oom {
    C10ErrorCtor ctor = nullptr;
    void *vtable_point = nullptr; /* OutOfMemoryError's vtable address point */
    std::type_info *type = nullptr;
    bool ready = false;
} g_c10;


/* c10's memory profiling hooks, resolved with the OOM symbols (vram_torch_use_c10). c10::Device
 * is two int8_t (a DeviceType, 1 for CUDA, and an index), trivially copyable: passed by value
 * as this struct is. */
struct C10Device {
    int8_t type, index;
};
typedef bool (*ProfilingEnabledFn)();
typedef void (*ReportUsageFn)(void *ptr, int64_t alloc_size, size_t total_allocated, size_t total_reserved,
                              C10Device device);
typedef void (*ReportOomFn)(int64_t alloc_size, size_t total_allocated, size_t total_reserved, C10Device device);
struct C10Profiler {
    std::atomic<ProfilingEnabledFn> enabled{nullptr};
    std::atomic<ReportUsageFn> report{nullptr};
    std::atomic<ReportOomFn> report_oom{nullptr};
} g_profiler;

/* Whether PyTorch's profiler records memory now (profile_memory=True) and `hook` was found; if
 * so, the device's allocated and reserved totals, which every report carries. */
bool profiler_totals(vram_allocator *a, const void *hook, size_t *allocated, size_t *reserved) {
    ProfilingEnabledFn enabled = g_profiler.enabled.load(std::memory_order_relaxed);
    if (!enabled || !hook || !enabled()) return false;
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    *allocated = (size_t)st.allocated_bytes[VRAM_POOL_ALL].current;
    *reserved = (size_t)st.reserved_bytes[VRAM_POOL_ALL].current;
    return true;
}

} // namespace

/* Tells PyTorch's profiler that `bytes` were allocated (or, negative, freed) at ptr, as PyTorch's
 * own allocator reports each block. */
void report_usage(vram_allocator *a, int device, void *ptr, int64_t bytes) {
    ReportUsageFn report = g_profiler.report.load(std::memory_order_relaxed);
    size_t allocated, reserved;
    if (profiler_totals(a, reinterpret_cast<const void *>(report), &allocated, &reserved))
        report(ptr, bytes, allocated, reserved, C10Device{1, (int8_t)device});
}

/* The same for an out-of-memory of `bytes` (the profiler's OOM event). */
void report_oom(vram_allocator *a, int device, int64_t bytes) {
    ReportOomFn report = g_profiler.report_oom.load(std::memory_order_relaxed);
    size_t allocated, reserved;
    if (profiler_totals(a, reinterpret_cast<const void *>(report), &allocated, &reserved))
        report(bytes, allocated, reserved, C10Device{1, (int8_t)device});
}

namespace {
void destroy_thrown(void *obj) {
    /* The complete-object destructor is the first virtual slot of a std::exception subclass. */
    typedef void (*Dtor)(void *);
    Dtor d = (*reinterpret_cast<Dtor **>(obj))[0];
    d(obj);
}

} // namespace

[[noreturn]] void throw_oom(const std::string &msg) {
    if (g_c10.ready) {
        const size_t kSize = 1024; /* more than sizeof(c10::Error) in any PyTorch 2.x */
        void *obj = abi::__cxa_allocate_exception(kSize);
        memset(obj, 0, kSize);
        g_c10.ctor(obj, C10SourceLocation{"vram_torch_alloc", __FILE__, (uint32_t)__LINE__}, msg);
        *reinterpret_cast<void **>(obj) = g_c10.vtable_point;
        abi::__cxa_throw(obj, g_c10.type, destroy_thrown);
    }
    throw std::runtime_error(msg);
}

bool resolve(const char *torch_lib_dir, std::string *error) {
    const char *libs[] = {"libc10_cuda.so", "libc10.so", "libtorch_cuda.so", "libtorch_cpu.so"};
    void *handles[4] = {};
    for (int i = 0; i < 4; i++) {
        std::string path = std::string(torch_lib_dir ? torch_lib_dir : "") + "/" + libs[i];
        handles[i] = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (!handles[i]) handles[i] = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);
    }
    auto find = [&](const char *sym) -> void * {
        for (void *h : handles)
            if (h)
                if (void *p = dlsym(h, sym)) return p;
        return nullptr;
    };
    void *ctor = find("_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
    if (!ctor) ctor = find("_ZN3c105ErrorC1ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
    void *vtable = find("_ZTVN3c1016OutOfMemoryErrorE");
    void *type = find("_ZTIN3c1016OutOfMemoryErrorE");
    /* the profiler's memory events (profile_memory=True), which PyTorch's pluggable allocator
     * never reports: c10::memoryProfilingEnabled(), c10::reportMemoryUsageToProfiler(void *,
     * int64_t, size_t, size_t, c10::Device) and c10::reportOutOfMemoryToProfiler(int64_t, size_t,
     * size_t, c10::Device) */
    g_profiler.enabled.store(reinterpret_cast<ProfilingEnabledFn>(find("_ZN3c1022memoryProfilingEnabledEv")));
    g_profiler.report.store(reinterpret_cast<ReportUsageFn>(find("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE")));
    g_profiler.report_oom.store(reinterpret_cast<ReportOomFn>(find("_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE")));
    for (void *h : handles)
        if (h) dlclose(h); /* RTLD_NOLOAD handles only add a reference; PyTorch keeps them loaded */
    if (!ctor || !vtable || !type) {
        *error = (std::string("c10::OutOfMemoryError not found in ") + (torch_lib_dir ? torch_lib_dir : "(null)") +
                  (ctor ? "" : " [Error ctor missing]") + (vtable ? "" : " [vtable missing]") + (type ? "" : " [type_info missing]"));
        g_c10.ready = false;
        return false;
    }
    g_c10.ctor = reinterpret_cast<C10ErrorCtor>(ctor);
    g_c10.vtable_point = static_cast<char *>(vtable) + 2 * sizeof(void *);
    g_c10.type = static_cast<std::type_info *>(type);
    g_c10.ready = true;
    return true;
}

} // namespace c10_symbols

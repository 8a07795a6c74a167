/* torch_plugin_hooks.cpp — what PyTorch's C++ gets from libvram_torch.so beyond alloc/free,
 * without PyTorch or a GPU: out-of-memory, the profiler's memory reports, and the answers given
 * through PyTorch's allocator object (cacheInfo, recordStream).
 *
 * The plug-in is loaded over the fake driver (tests/fakes/fake_cuda.c, 1 GiB) and driven as
 * PyTorch's CUDAPluggableAllocator drives it.
 *   - Out of memory: a request beyond the memory fraction's limit calls the observer set with
 *     vram_torch_set_oom_observer once, with (device, bytes asked, the limit, bytes free on the
 *     device), before the error is thrown (a std::runtime_error here: the stand-in c10 has no
 *     OutOfMemoryError), the report is kept for vram_torch_oom_report, and the allocator serves
 *     what fits afterwards. Without an observer, nothing is called.
 *   - Profiler: with a stand-in libc10.so loaded (tests/fakes/fake_c10.cpp) and given to
 *     vram_torch_use_c10, each allocation and free is reported to
 *     c10::reportMemoryUsageToProfiler (+bytes / -bytes, the device's allocated and reserved
 *     totals, the CUDA device) while c10::memoryProfilingEnabled() says so, and not otherwise;
 *     an out-of-memory to c10::reportOutOfMemoryToProfiler.
 *   - PyTorch's allocator object: with a stand-in libtorch_cuda.so (tests/fakes/
 *     fake_torch_cuda.cpp) whose CUDAPluggableAllocator raises on cacheInfo and drops
 *     recordStream, vram_torch_patch_pluggable refuses while no such object is current, then
 *     makes the object answer cacheInfo from vram (the memory still mappable under the limit, or
 *     the caller's larger guess) and pass recordStream to vram (the freed block stays active for
 *     the other stream), and a second patch changes nothing.
 * (The Python side, torch._C._cuda_attach_out_of_memory_observer through vram_torch,
 * torch.profiler's memory columns and cuDNN's benchmark mode, runs on the GPU:
 * tests/gpu/test_torch_plugin.py.)
 *
 * Usage: torch_plugin_hooks LIBVRAM_TORCH FAKE_LIBCUDA FAKE_TORCH_LIB_DIR
 */
#include <dlfcn.h>
#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace {

int passed, failed;

const char *dlerror_or(void *handle) {
    const char *e = handle ? nullptr : dlerror();
    return e ? e : "";
}

void check(bool ok, const std::string &what) {
    if (ok) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAIL: %s\n", what.c_str());
    }
}

struct Seen {
    int calls = 0;
    int device = -1;
    long long alloc = 0, limit = 0, free = 0;
} seen;

void observer(int device, long long alloc, long long limit, long long free) {
    seen.calls++;
    seen.device = device;
    seen.alloc = alloc;
    seen.limit = limit;
    seen.free = free;
}

typedef void *(*AllocFn)(ssize_t, int, void *);
typedef void (*FreeFn)(void *, ssize_t, int, void *);
typedef void (*ObserverFn)(int, long long, long long, long long);

/* The profiler's reports, through the stand-in libc10.so in c10_dir. */
void profiler_reports(void *lib, const char *c10_dir, AllocFn alloc, FreeFn release) {
    std::string path = std::string(c10_dir) + "/libc10.so";
    void *c10 = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    auto use_c10 = reinterpret_cast<int (*)(const char *)>(dlsym(lib, "vram_torch_use_c10"));
    auto set_profiling = c10 ? reinterpret_cast<void (*)(int)>(dlsym(c10, "fake_c10_set_profiling")) : nullptr;
    auto nreports = c10 ? reinterpret_cast<size_t (*)()>(dlsym(c10, "fake_c10_reports")) : nullptr;
    auto report = c10 ? reinterpret_cast<int (*)(size_t, void **, int64_t *, size_t *, size_t *, int *, int *)>(
                            dlsym(c10, "fake_c10_report"))
                      : nullptr;
    check(c10 && use_c10 && set_profiling && nreports && report, std::string("the stand-in c10: ") + dlerror_or(c10));
    if (!c10 || !use_c10 || !set_profiling || !nreports || !report) return;
    check(use_c10(c10_dir) == 0, "no OutOfMemoryError in the stand-in: use_c10 says so (the hooks are found anyway)");
    const long long MiB = 1 << 20;
    void *quiet = alloc(3 * MiB, 0, nullptr);
    release(quiet, 3 * MiB, 0, nullptr);
    check(nreports() == 0, "not profiling: no reports");
    set_profiling(1);
    void *p = alloc(5 * MiB, 0, nullptr);
    void *q = alloc(7 * MiB, 0, nullptr);
    release(p, 5 * MiB, 0, nullptr);
    auto ooms = reinterpret_cast<int64_t (*)(int64_t *)>(dlsym(c10, "fake_c10_ooms"));
    int64_t oom_bytes = 0;
    try {
        alloc(400 * MiB, 0, nullptr); /* over the limit of 256 MiB set above */
    } catch (const std::exception &) {
    }
    check(ooms && ooms(&oom_bytes) == 1 && oom_bytes == 400 * MiB,
          "the out-of-memory reported to the profiler once: " + std::to_string(oom_bytes));
    set_profiling(0);
    release(q, 7 * MiB, 0, nullptr);
    check(nreports() == 3, "profiling: two allocations and a free reported, the free after it not: " +
                               std::to_string(nreports()));
    const long long want[3] = {5 * MiB, 7 * MiB, -5 * MiB};
    void *const ptrs[3] = {p, q, p};
    for (size_t i = 0; i < 3 && i < nreports(); i++) {
        void *ptr;
        int64_t bytes;
        size_t allocated, reserved;
        int type, index;
        report(i, &ptr, &bytes, &allocated, &reserved, &type, &index);
        check(ptr == ptrs[i] && bytes == want[i] && type == 1 && index == 0,
              "report " + std::to_string(i) + ": " + std::to_string(bytes) + " bytes on device type " +
                  std::to_string(type) + ":" + std::to_string(index));
        /* the totals after it: 100 MiB kept by the first part, then these */
        long long after = 100 * MiB + (i == 0 ? 5 * MiB : i == 1 ? 12 * MiB : 7 * MiB);
        check((long long)allocated == after && reserved >= allocated,
              "report " + std::to_string(i) + ": allocated " + std::to_string(allocated) + " (want " +
                  std::to_string(after) + "), reserved " + std::to_string(reserved));
    }
}

/* A statistic of device 0 from the plug-in's "name value" lines (-1 if absent). */
long long stat_of(void *lib, const char *name) {
    auto text_of = reinterpret_cast<char *(*)(int)>(dlsym(lib, "vram_torch_stats_text"));
    auto string_free = reinterpret_cast<void (*)(char *)>(dlsym(lib, "vram_torch_string_free"));
    char *text = text_of ? text_of(0) : nullptr;
    long long value = -1;
    std::string key = std::string("\n") + name + " ";
    std::string all = std::string("\n") + (text ? text : "");
    size_t at = all.find(key);
    if (at != std::string::npos) value = atoll(all.c_str() + at + key.size());
    if (text && string_free) string_free(text);
    return value;
}

/* cacheInfo (torch.backends.cudnn.benchmark asks it) and recordStream (ProcessGroupNCCL calls it)
 * through the stand-in libtorch_cuda.so in torch_dir, whose CUDAPluggableAllocator raises on the
 * first and drops the second, as PyTorch's does. */
void pluggable_patch(void *lib, const char *torch_dir, AllocFn alloc, FreeFn release) {
    void *torch = dlopen((std::string(torch_dir) + "/libtorch_cuda.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    auto patch = reinterpret_cast<int (*)(const char *)>(dlsym(lib, "vram_torch_patch_pluggable"));
    auto last_error = reinterpret_cast<const char *(*)()>(dlsym(lib, "vram_torch_last_error"));
    auto install = torch ? reinterpret_cast<void (*)()>(dlsym(torch, "fake_torch_install")) : nullptr;
    auto cache_info = torch ? reinterpret_cast<int (*)(int, size_t *)>(dlsym(torch, "fake_torch_cache_info")) : nullptr;
    auto record = torch ? reinterpret_cast<void (*)(void *, int, int64_t)>(dlsym(torch, "fake_torch_record_stream")) : nullptr;
    check(torch && patch && last_error && install && cache_info && record,
          std::string("the stand-in libtorch_cuda: ") + dlerror_or(torch));
    if (!torch || !patch || !last_error || !install || !cache_info || !record) return;
    check(patch(torch_dir) == 0 && strstr(last_error(), "not a CUDAPluggableAllocator"),
          std::string("no allocator object yet: nothing patched: ") + last_error());
    install();
    size_t largest = 0;
    check(cache_info(0, &largest) == -1, "PyTorch's pluggable allocator raises on cacheInfo");
    const long long MiB4 = 4 << 20;
    void *used = alloc(MiB4, 0, nullptr);
    record(used, 0, 0x2000); /* dropped: the block is free for stream 0 at once */
    release(used, MiB4, 0, nullptr);
    check(stat_of(lib, "active_bytes.all.current") == 100 * (1 << 20), "unpatched, a C++ recordStream is dropped: active " +
                                                                         std::to_string(stat_of(lib, "active_bytes.all.current")));
    check(patch(torch_dir) == 1, std::string("patched: ") + last_error());
    used = alloc(MiB4, 0, nullptr);
    record(used, 0, 0x2000);
    release(used, MiB4, 0, nullptr);
    check(stat_of(lib, "active_bytes.all.current") == 100 * (1 << 20) + MiB4 &&
              stat_of(lib, "allocated_bytes.all.current") == 100 * (1 << 20),
          "patched, recordStream reaches vram: the freed block stays active until stream 0x2000's work is done: " +
              std::to_string(stat_of(lib, "active_bytes.all.current")));
    record(nullptr, 0, 0x2000); /* an empty tensor's: nothing */
    largest = 0;
    const size_t MiB = 1 << 20;
    check(cache_info(0, &largest) == 0 && largest > 0 && largest <= 256 * MiB,
          "cacheInfo answers from vram: what may still be mapped under the 256 MiB limit, " + std::to_string(largest));
    largest = (size_t)1 << 40;
    check(cache_info(0, &largest) == 0 && largest == (size_t)1 << 40, "a caller's larger guess stands, as in PyTorch");
    check(patch(torch_dir) == 0, "a second patch finds the object already changed and changes nothing");
    largest = 0;
    check(cache_info(0, &largest) == 0 && largest > 0, "and the first patch still answers");
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: torch_plugin_hooks LIBVRAM_TORCH FAKE_LIBCUDA FAKE_TORCH_LIB_DIR\n");
        return 2;
    }
    setenv("VRAM_LIBCUDA", argv[2], 1);
    setenv("FAKE_CUDA_MEMORY", "1073741824", 1);
    setenv("VRAM_ALLOC_CONF", "", 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    auto alloc = reinterpret_cast<AllocFn>(dlsym(lib, "vram_torch_alloc"));
    auto release = reinterpret_cast<FreeFn>(dlsym(lib, "vram_torch_free"));
    auto set_observer = reinterpret_cast<void (*)(ObserverFn)>(dlsym(lib, "vram_torch_set_oom_observer"));
    auto set_fraction = reinterpret_cast<int (*)(double, int)>(dlsym(lib, "vram_torch_set_memory_fraction"));
    auto oom_report = reinterpret_cast<const char *(*)(int)>(dlsym(lib, "vram_torch_oom_report"));
    if (!alloc || !release || !set_observer || !set_fraction || !oom_report) {
        fprintf(stderr, "a vram_torch_* function is missing from %s\n", argv[1]);
        return 1;
    }
    const long long MiB = 1 << 20;
    check(set_fraction(0.25, 0) == 0, "a memory fraction of 1/4: a limit of 256 MiB");
    set_observer(observer);
    void *kept = alloc(100 * MiB, 0, nullptr);
    check(kept != nullptr && seen.calls == 0, "100 MiB fit; no observer call");

    auto too_much = [&](long long bytes) {
        try {
            void *p = alloc(bytes, 0, nullptr);
            release(p, bytes, 0, nullptr);
            return std::string();
        } catch (const std::exception &e) {
            return std::string(e.what());
        }
    };
    std::string error = too_much(400 * MiB);
    check(error.rfind("CUDA out of memory. Tried to allocate 400.00 MiB on cuda:0", 0) == 0,
          "400 MiB over the limit throws, with PyTorch's opening words (batch-size finders look for \"CUDA out of "
          "memory.\"): " + error.substr(0, 120));
    check(seen.calls == 1 && seen.device == 0 && seen.alloc == 400 * MiB && seen.limit == 256 * MiB,
          "the observer saw (device, bytes asked, limit) = (" + std::to_string(seen.device) + ", " +
              std::to_string(seen.alloc) + ", " + std::to_string(seen.limit) + "), once: " + std::to_string(seen.calls));
    check(seen.free > 0 && seen.free <= 1024 * MiB, "and the device's free bytes: " + std::to_string(seen.free));
    check(strstr(oom_report(0), "400.00 MiB") != nullptr, std::string("the report is kept: ") + oom_report(0));

    void *fits = alloc(150 * MiB, 0, nullptr);
    check(fits != nullptr && seen.calls == 1, "after it, 150 MiB more fit under the limit");
    release(fits, 150 * MiB, 0, nullptr);
    set_observer(nullptr);
    error = too_much(400 * MiB);
    check(!error.empty() && seen.calls == 1, "no observer set: the error, and nobody called");
    profiler_reports(lib, argv[3], alloc, release);
    pluggable_patch(lib, argv[3], alloc, release);
    release(kept, 100 * MiB, 0, nullptr);
    printf("torch_plugin_hooks: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

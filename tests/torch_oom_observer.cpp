/* torch_oom_observer.cpp — libvram_torch.so's out-of-memory path without PyTorch or a GPU.
 *
 * The plug-in is loaded over the fake driver (tests/fakes/fake_cuda.c, 1 GiB) and driven as
 * PyTorch's CUDAPluggableAllocator drives it: a request beyond the memory fraction's limit calls
 * the observer set with vram_torch_set_oom_observer once, with (device, bytes asked, the limit,
 * bytes free on the device), before the error is thrown (a std::runtime_error here: there is
 * no c10 to throw PyTorch's OutOfMemoryError), the report is kept for vram_torch_oom_report,
 * and the allocator serves what fits afterwards. Without an observer, nothing is called.
 * (The Python side, torch._C._cuda_attach_out_of_memory_observer through vram_torch, runs on
 * the GPU: tests/gpu/test_torch_plugin.py.)
 *
 * Usage: torch_oom_observer LIBVRAM_TORCH FAKE_LIBCUDA
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

} // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: torch_oom_observer LIBVRAM_TORCH FAKE_LIBCUDA\n");
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
    check(error.find("out of memory") != std::string::npos, "400 MiB over the limit throws: " + error.substr(0, 120));
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
    release(kept, 100 * MiB, 0, nullptr);
    printf("torch_oom_observer: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* bench_torch_plugin.cpp — what one allocate + free costs through libvram_torch.so's two entry
 * points (vram_torch_alloc / vram_torch_free, as PyTorch's CUDAPluggableAllocator calls them),
 * from C++, no Python: the plug-in's own work on top of the allocator's (the device table, the
 * stacks' check, the profiler's hooks).
 *
 *   bench_torch_plugin LIBVRAM_TORCH [C10_DIR] [--pairs N] [--repeat R]
 *
 * The plug-in is loaded as PyTorch would load it; on a machine without a GPU, point VRAM_LIBCUDA
 * at the fake driver (tests/fakes/libfake_cuda.so). With C10_DIR, a libc10.so there is loaded
 * first (PyTorch's, or the tests' stand-in) and given to vram_torch_use_c10, so that every call
 * asks c10::memoryProfilingEnabled() as it does under PyTorch. Prints the median and fastest of
 * R runs of N pairs of 4 KiB on stream 0, device 0; with --trace FILE, of R replays of a memtrace
 * (every allocation and free of a recorded program, in order, all on stream 0, each replay on the
 * allocator the previous one left warm), per event: what vram does per allocation for that
 * program, the device calls included (the fake driver's are cheap: a GPU's are not).
 */
#include <dlfcn.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "vram/bench.h"
#include "vram/trace.h"
}

typedef void *(*AllocFn)(ssize_t, int, void *);
typedef void (*FreeFn)(void *, ssize_t, int, void *);

/* R replays of the trace at `path` through the plug-in; the per-event times, or empty with a
 * message when the trace cannot be read or a request fails. */
static std::vector<double> replay_trace(AllocFn alloc, FreeFn release, const char *path, long repeat, size_t *events) {
    std::vector<double> ns;
    vram_trace *t = nullptr;
    if (vram_trace_load(path, &t) != VRAM_OK) {
        fprintf(stderr, "bench_torch_plugin: %s\n", vram_last_error());
        return ns;
    }
    size_t n = 0;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    std::vector<void *> ptrs(vram_trace_num_allocs(t), nullptr);
    std::vector<ssize_t> sizes(ptrs.size(), 0);
    bool failed = false;
    for (long r = 0; r < repeat && !failed; r++) {
        auto t0 = std::chrono::steady_clock::now();
        for (size_t i = 0; i < n; i++) {
            const vram_trace_event &e = ev[i];
            if (e.op == VRAM_TRACE_ALLOC) {
                ptrs[e.index] = alloc((ssize_t)e.size, 0, nullptr);
                sizes[e.index] = (ssize_t)e.size;
                if (!ptrs[e.index] && e.size) failed = true;
            } else {
                release(ptrs[e.index], sizes[e.index], 0, nullptr);
                ptrs[e.index] = nullptr;
            }
        }
        ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / (double)n);
        for (size_t k = 0; k < ptrs.size(); k++) /* what the trace never frees, before the next replay */
            if (ptrs[k]) release(ptrs[k], sizes[k], 0, nullptr), ptrs[k] = nullptr;
    }
    vram_trace_free(t);
    if (failed) {
        fprintf(stderr, "bench_torch_plugin: %s: a request got no memory\n", path);
        ns.clear();
    }
    *events = n;
    return ns;
}

int main(int argc, char **argv) {
    const char *lib_path = nullptr, *c10_dir = nullptr, *trace = nullptr;
    long pairs = 2000000, repeat = 9;
    bool bad = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pairs") && i + 1 < argc) pairs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atol(argv[++i]);
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc) trace = argv[++i];
        else if (argv[i][0] == '-' || (lib_path && c10_dir)) bad = true; /* an unknown option, a third path */
        else if (!lib_path) lib_path = argv[i];
        else c10_dir = argv[i];
    }
    if (bad || !lib_path || pairs < 1 || repeat < 1 || repeat > 1000) {
        fprintf(stderr, "usage: bench_torch_plugin LIBVRAM_TORCH [C10_DIR] [--pairs N >= 1] [--repeat 1..1000] [--trace FILE]\n");
        return 2;
    }
    if (c10_dir && !dlopen((std::string(c10_dir) + "/libc10.so").c_str(), RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "bench_torch_plugin: %s\n", dlerror());
        return 1;
    }
    void *lib = dlopen(lib_path, RTLD_NOW);
    auto alloc = lib ? reinterpret_cast<AllocFn>(dlsym(lib, "vram_torch_alloc")) : nullptr;
    auto release = lib ? reinterpret_cast<FreeFn>(dlsym(lib, "vram_torch_free")) : nullptr;
    auto use_c10 = lib ? reinterpret_cast<int (*)(const char *)>(dlsym(lib, "vram_torch_use_c10")) : nullptr;
    if (!alloc || !release || !use_c10) {
        fprintf(stderr, "bench_torch_plugin: %s is not libvram_torch.so (%s)\n", lib_path, lib ? "" : dlerror());
        return 1;
    }
    if (c10_dir) use_c10(c10_dir);
    vram_machine_info m;
    vram_machine_info_get(&m);
    printf("# machine: %s, %u cores, %s, %s\n# command:", m.cpu, m.cores, m.os, m.date);
    for (int i = 0; i < argc; i++) printf(" %s", argv[i]);
    printf("\n");
    std::vector<double> ns;
    if (trace) {
        size_t events = 0;
        try {
            ns = replay_trace(alloc, release, trace, repeat, &events);
        } catch (const std::exception &e) {
            fprintf(stderr, "bench_torch_plugin: %s\n", e.what());
            return 1;
        }
        if (ns.empty()) return 1;
        std::sort(ns.begin(), ns.end());
        printf("%s: %zu events through the plug-in: %.1f ns an event (median of %ld replays; fastest %.1f)\n", trace,
               events, ns[ns.size() / 2], repeat, ns[0]);
        return 0;
    }
    try {
        for (long r = 0; r < repeat; r++) {
            auto t0 = std::chrono::steady_clock::now();
            for (long i = 0; i < pairs; i++) release(alloc(4096, 0, nullptr), 4096, 0, nullptr);
            ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / pairs);
        }
    } catch (const std::exception &e) {
        fprintf(stderr, "bench_torch_plugin: %s\n", e.what());
        return 1;
    }
    std::sort(ns.begin(), ns.end());
    printf("alloc + free of 4 KiB through the plug-in: %.1f ns (median of %ld x %ld pairs; fastest %.1f)\n",
           ns[ns.size() / 2], repeat, pairs, ns[0]);
    return 0;
}

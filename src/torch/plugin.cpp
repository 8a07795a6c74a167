/* plugin.cpp — libvram_torch.so: vram's caching allocator as PyTorch's CUDA allocator.
 *
 * torch.cuda.memory.CUDAPluggableAllocator loads two C functions from this library,
 * vram_torch_alloc and vram_torch_free; python/vram_torch (ctypes) loads it, swaps it in and
 * calls the other exported functions for what PyTorch's own memory_stats(), memory_summary(),
 * empty_cache(), ... cannot do for a pluggable allocator.
 *
 * State: one vram allocator per CUDA ordinal, created on the first allocation on that device
 * over the device "cuda:N" (the primary context, which PyTorch uses too), with its
 * configuration from VRAM_ALLOC_CONF or, where that is unset, from PyTorch's own allocator
 * settings (torch_conf.cpp; what they cannot set is printed once), and the program's
 * _set_allocator_settings, caching_allocator_enable and _record_memory_history calls. The table
 * of allocators is read without a lock (atomic pointers); creation takes a mutex. Allocators live
 * until the process ends, as PyTorch's do. A device vram has not started on is answered, where
 * asked, from a throwaway allocator over a simulated device (with_allocator_or_idle), so that no
 * question makes a CUDA context on a GPU.
 *
 * Out of memory: PyTorch's pluggable allocator has no error channel (a NULL return becomes a
 * tensor at address 0, and the next kernel faults the whole CUDA context), so the only way to
 * give the script its torch.OutOfMemoryError is to throw c10::OutOfMemoryError through
 * PyTorch's C++ frames, without linking libtorch: c10_symbols.cpp finds what it needs in the
 * libraries PyTorch has loaded (vram_torch_use_c10). If those symbols cannot be found, a
 * std::runtime_error with the same text is thrown (a RuntimeError in Python, which
 * OutOfMemoryError subclasses). Either way the allocator's
 * report is printed to stderr and kept for vram_torch_oom_report().
 *
 * That is why this file is C++ (the rest of vram is C11): only C++ can unwind through torch.
 *
 * CUDA graphs: PyTorch never tells a pluggable allocator about captures, so vram_torch wraps
 * torch.cuda.CUDAGraph and calls vram_torch_graph_pool and vram_torch_graph_pool_stream to keep
 * each graph's memory in a private pool (vram_allocator_begin_pool / bind_pool / end_pool /
 * release_pool); for torch.compile's CUDA graph trees it stands in for PyTorch's pool calls
 * that a pluggable allocator lacks: vram_torch_graph_pool_stream (op 1: a stream's allocations
 * into a pool outside a capture), vram_torch_graph_pool_live_equal (checkPoolLiveAllocations)
 * and, for checkpoints, vram_torch_graph_pool_blocks and vram_torch_graph_pool_recreate.
 *
 * Stacks for the memory visualizer: after vram_torch_set_stacks, an allocation gathers the
 * calling thread's Python stack (py_stacks.cpp), keeps its id by the block's address and sets it
 * as the thread's vram context for the allocator call, so that the history events it records
 * carry it (frees too, in mode 3); vram_torch's snapshot() turns the ids into frames.
 *
 * Categories (categories.cpp): new blocks get the tag vram_torch's tracker sets for the phase the
 * program is in, are re-tagged as PyTorch reveals what they are, and each allocation updates the
 * windows of per-tag peaks; an out-of-memory's message then names the categories.
 *
 * Also for PyTorch's debugging tools, which a pluggable allocator otherwise leaves blind: an
 * out-of-memory calls the observer set with vram_torch_set_oom_observer (vram_torch's trampoline
 * to torch._C._cuda_attach_out_of_memory_observer's callbacks) before the throw, and every
 * allocation, free and out-of-memory is reported to PyTorch's profiler through c10's hooks
 * (c10_symbols.cpp), as PyTorch's own allocator reports them; and
 * vram_torch_patch_pluggable makes PyTorch's allocator object answer what its C++ callers ask and
 * the pluggable allocator refuses or drops: cacheInfo (cuDNN's benchmark mode) and recordStream
 * (ProcessGroupNCCL); pluggable_patch.cpp.
 */
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

#include "c10_symbols.h"
#include "categories.h"
#include "plan_route.h"
#include "pluggable_patch.h"
#include "py_stacks.h"
#include "torch_conf.h"

extern "C" {
#include "vram/alloc.h"
#include "vram/snapshot.h"
#include "vram/summary.h"
}

#define VRAM_TORCH_API extern "C" __attribute__((visibility("default")))


namespace {

constexpr int kMaxDevices = 64;

struct DeviceSlot {
    std::atomic<vram_allocator *> alloc{nullptr};
    vram_device *dev = nullptr;
    std::string oom_report;
};

DeviceSlot g_slots[kMaxDevices];
std::mutex g_mutex;                /* creation of allocators, oom_report strings, g_settings,
                                    * g_caching, g_history */
/* What the program passed to torch.cuda.memory._set_allocator_settings, each option once with its
 * last value (torch_conf_merge): applied to each allocator that starts afterwards (torch_conf.h). */
std::string g_settings;
/* caching_allocator_enable's last word for allocators that start later: -1 none, else 0 / 1. */
int g_caching = -1;
/* The event ring _record_memory_history last asked of every device (vram_torch_set_history with
 * device -1), for allocators that start later: -1 none asked (their configuration's history
 * option holds), else its entries (0: off). */
long long g_history = -1;
/* Python stacks kept for snapshots (vram_torch_set_stacks): 0 none, 1 the live blocks' ("state"),
 * 2 those and allocation events' ("alloc"), 3 frees' events' too ("all"). */
std::atomic<int> g_stacks{0};
/* torch._C._cuda_attach_out_of_memory_observer under vram (vram_torch_set_oom_observer). */
typedef void (*OomObserver)(int device, long long alloc, long long device_limit, long long device_free);
std::atomic<OomObserver> g_oom_observer{nullptr};
thread_local std::string g_error;  /* per thread, as vram_last_error: a caller reads its own */

void set_error(const std::string &msg) { g_error = msg; }

/* 0 for VRAM_OK; else -1, with vram's message as the last error. */
int status_of(vram_status st) {
    if (st == VRAM_OK) return 0;
    set_error(vram_last_error());
    return -1;
}

/* The configuration an allocator starting now gets, and what of PyTorch's settings it leaves
 * out: the environment and the program's settings calls (torch_conf.h), then its last
 * caching_allocator_enable. g_mutex held. */
vram_status starting_config(vram_alloc_config *cfg, std::string *notes) {
    vram_status st = torch_alloc_config(cfg, notes, g_settings);
    if (st == VRAM_OK && g_caching >= 0) cfg->caching = g_caching;
    return st;
}

/* Whether `device` is an ordinal vram can hold an allocator for; if not, the error says so. */
bool device_in_range(int device) {
    if (device >= 0 && device < kMaxDevices) return true;
    set_error("device index " + std::to_string(device) + " out of range");
    return false;
}

vram_allocator *get_allocator(int device, bool create) {
    if (!device_in_range(device)) return nullptr;
    vram_allocator *a = g_slots[device].alloc.load(std::memory_order_acquire);
    if (a || !create) {
        if (!a) set_error("vram has not allocated on cuda:" + std::to_string(device) + " yet");
        return a;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    a = g_slots[device].alloc.load(std::memory_order_acquire);
    if (a) return a;
    char spec[32];
    snprintf(spec, sizeof spec, "cuda:%d", device);
    vram_device *dev = nullptr;
    vram_alloc_config cfg;
    std::string notes;
    vram_status st = starting_config(&cfg, &notes);
    if (st == VRAM_OK) st = vram_device_open(spec, &dev);
    if (st == VRAM_OK) {
        st = vram_allocator_new(dev, &cfg, &a);
        if (st != VRAM_OK) vram_device_close(dev);
    }
    static bool noted = false; /* the notes once a process, not once a device (under g_mutex) */
    if (st == VRAM_OK && !notes.empty() && !noted) {
        fprintf(stderr, "vram: %s\n", notes.c_str());
        noted = true;
    }
    if (st != VRAM_OK) {
        g_error = std::string("vram: cannot start the allocator on ") + spec + ": " + vram_last_error();
        fprintf(stderr, "%s\n", g_error.c_str());
        return nullptr;
    }
    /* the history asked of every device (a failure is host memory: the allocator runs on without) */
    if (g_history >= 0 && vram_allocator_set_history(a, (uint32_t)g_history) != VRAM_OK)
        fprintf(stderr, "vram: no memory history on %s: %s\n", spec, vram_last_error());
    categories::on_new_allocator(a);
    if (!plan_route::on_new_allocator(device, a)) /* (runs on without: a plan is a measurement's option) */
        fprintf(stderr, "vram: no step plan on %s: %s\n", spec, vram_last_error());
    g_slots[device].dev = dev;
    g_slots[device].alloc.store(a, std::memory_order_release);
    return a;
}

/* Runs fn on the device's allocator, or, where vram has not started on the device, on a throwaway
 * allocator over a simulated device, numbered as `device`, with the configuration that device
 * would start with: the figures of such a device (every statistic at zero, as PyTorch's allocator
 * reports a device no tensor has used yet, with that configuration's max_split_size) without
 * making a CUDA context on its GPU (a DDP rank that loops over every device's statistics would
 * otherwise hold one on each). false, with the error, for a bad device or when the throwaway
 * allocator cannot be made. */
bool with_allocator_or_idle(int device, const std::function<void(vram_allocator *)> &fn) {
    if (!device_in_range(device)) return false;
    if (vram_allocator *started = get_allocator(device, false)) {
        fn(started);
        return true;
    }
    vram_alloc_config cfg;
    std::string notes;
    vram_status st;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        st = starting_config(&cfg, &notes);
    }
    vram_device *dev = nullptr;
    vram_allocator *a = nullptr;
    cfg.history_entries = 0; /* (a ring the idle figures never read: up to 16M events of host memory) */
    if (st == VRAM_OK) st = vram_device_open("sim", &dev);
    if (st == VRAM_OK) dev->index = device; /* (what the summary's header names) */
    if (st == VRAM_OK) st = vram_allocator_new(dev, &cfg, &a);
    if (st == VRAM_OK) categories::on_new_allocator(a); /* (the tags a started device has) */
    if (st == VRAM_OK) fn(a);
    else set_error(vram_last_error());
    if (a) vram_allocator_destroy(a);
    if (dev) vram_device_close(dev);
    return st == VRAM_OK;
}

/* Sets the calling thread's vram context for one allocator call (history events carry it) and
 * puts the old one back, also when an out-of-memory unwinds through it. */
struct ContextScope {
    uint32_t saved;
    explicit ContextScope(uint32_t context) : saved(vram_context()) { vram_set_context(context); }
    ~ContextScope() { vram_set_context(saved); }
};

} // namespace

vram_allocator *plugin_allocator(int device) {
    return device >= 0 && device < kMaxDevices ? g_slots[device].alloc.load(std::memory_order_acquire) : nullptr;
}

/* The vram version this library was built as (CMakeLists.txt's project()); vram_torch refuses a
 * library whose version is not its own. */
VRAM_TORCH_API const char *vram_torch_version(void) { return VRAM_VERSION; }

/* Tells the plug-in where PyTorch's libraries are (torch/lib), so an out-of-memory can be
 * thrown as c10::OutOfMemoryError. Returns 1 if that is now possible, 0 if not (the detail is
 * in vram_torch_last_error). */
VRAM_TORCH_API int vram_torch_use_c10(const char *torch_lib_dir) {
    std::string error;
    if (c10_symbols::resolve(torch_lib_dir, &error)) return 1;
    set_error(error);
    return 0;
}

/* A request for no bytes gets no memory and a null pointer, as from PyTorch's own allocator
 * (which serves empty tensors without allocating: their data_ptr() is 0), and its free is a
 * no-op: a pluggable allocator is asked for them all the same (a GPT-2 sampling run asks 23,000
 * times), and a 512-byte block each would count in the statistics that native's leave them out
 * of. */
VRAM_TORCH_API void *vram_torch_alloc(ssize_t size, int device, void *stream) {
    if (size <= 0) return nullptr;
    vram_allocator *a = get_allocator(device, true);
    if (!a) c10_symbols::throw_oom(g_error);
    void *p = nullptr;
    int stacks = g_stacks.load(std::memory_order_relaxed);
    uint32_t stack = stacks ? py_stacks::gather() : 0;
    vram_status st;
    {
        std::optional<ContextScope> scope; /* only while events carry stacks: no context touched otherwise */
        if (stacks >= 2) scope.emplace(stack);
        if (!plan_route::allocate(device, (size_t)size, (vram_stream)stream, categories::default_tag(), &p, &st))
            st = vram_allocator_malloc(a, (size_t)size, (vram_stream)stream, categories::default_tag(), &p);
    }
    if (st == VRAM_OK) {
        if (stack) py_stacks::block_set((uint64_t)(uintptr_t)p, stack);
        c10_symbols::report_usage(a, device, p, (int64_t)size);
        categories::observe(a, device);
        return p;
    }
    std::string msg;
    if (st == VRAM_ERR_OUT_OF_MEMORY) {
        const char *report = vram_allocator_oom_report(a);
        char req[32];
        vram_format_size((uint64_t)size, req, sizeof req);
        /* begins as PyTorch's own message does: batch-size finders (accelerate's
         * find_executable_batch_size, toma, ...) look for "CUDA out of memory." in the text */
        msg = std::string("CUDA out of memory. Tried to allocate ") + req + " on cuda:" + std::to_string(device) +
              " (vram).\n" + (report && *report ? report : vram_last_error());
        std::string lines = categories::oom_lines(a);
        if (!lines.empty()) msg += "\n" + lines;
        std::lock_guard<std::mutex> lock(g_mutex);
        g_slots[device].oom_report = msg;
    } else {
        msg = std::string("vram allocation failed on cuda:") + std::to_string(device) + ": " + vram_status_str(st) + ": " +
              vram_last_error();
    }
    fprintf(stderr, "%s\n", msg.c_str());
    set_error(msg);
    if (st == VRAM_ERR_OUT_OF_MEMORY) c10_symbols::report_oom(a, device, (int64_t)size);
    OomObserver observer = g_oom_observer.load();
    if (st == VRAM_ERR_OUT_OF_MEMORY && observer) {
        /* as PyTorch's allocator calls its observers: device, bytes asked, the memory the
         * allocator may use (its limit), bytes free on the device; no lock is held */
        size_t dfree = 0, dtotal = 0;
        vram_device *dev = g_slots[device].dev;
        if (dev->ops->mem_info) dev->ops->mem_info(dev, &dfree, &dtotal);
        observer(device, (long long)size, (long long)vram_allocator_limit(a), (long long)dfree);
    }
    c10_symbols::throw_oom(msg);
}

namespace {
/* cacheInfo's answer (cache_info.cpp), by PyTorch's own rule over vram's figures: the caller's
 * guess, or else the memory vram may still map on the device (free there and under vram's
 * limit), raised to the largest block vram could hand out without asking the device. */
void answer_cache_info(int device, size_t *largest) {
    vram_allocator *a = get_allocator(device, true);
    if (!a) return;
    if (*largest == 0) *largest = (size_t)vram_allocator_room(a);
    uint64_t cached = vram_allocator_largest_free(a);
    if (cached > *largest) *largest = (size_t)cached;
}

/* recordStream from PyTorch's C++ (ProcessGroupNCCL, ...), as Tensor.record_stream. */
void answer_record_stream(void *ptr, int device, void *stream) {
    vram_allocator *a = get_allocator(device, false);
    if (void *arena = a ? plan_route::arena_of(device, ptr) : nullptr) ptr = arena;
    if (a) vram_allocator_record_stream(a, ptr, (vram_stream)stream); /* an unknown block: nothing to keep */
}
} // namespace

/* Makes PyTorch's CUDAPluggableAllocator object answer, from vram, the methods its C++ callers
 * use and it refuses or drops: cacheInfo (torch.backends.cudnn.benchmark asks it before every new
 * convolution) and recordStream (ProcessGroupNCCL's collectives); pluggable_patch.cpp. Call after
 * the allocator is swapped in. 1 when both are answered; 0 with the reason in
 * vram_torch_last_error (nothing changed, or the methods left as they were). */
VRAM_TORCH_API int vram_torch_patch_pluggable(const char *torch_lib_dir) {
    std::string why = patch_pluggable(torch_lib_dir, PluggableAnswers{answer_cache_info, answer_record_stream});
    if (why.empty()) return 1;
    set_error(why);
    return 0;
}

/* Calls `observer` on every out-of-memory from now on (NULL: none), before the error is thrown;
 * vram_torch's attach_out_of_memory_observer gives it a trampoline to the Python observers. */
VRAM_TORCH_API void vram_torch_set_oom_observer(OomObserver observer) { g_oom_observer.store(observer); }

VRAM_TORCH_API void vram_torch_free(void *ptr, ssize_t size, int device, void *stream) {
    (void)stream; /* the allocator knows the block's stream */
    if (!ptr) return; /* what a request for no bytes returned */
    vram_allocator *a = get_allocator(device, false);
    int stacks = g_stacks.load(std::memory_order_relaxed);
    if (stacks) py_stacks::block_drop((uint64_t)(uintptr_t)ptr);
    std::optional<ContextScope> scope; /* frees' events carry stacks in mode 3 only */
    if (stacks >= 3) scope.emplace(py_stacks::gather());
    vram_status st = VRAM_ERR_NOT_FOUND;
    if (a && !plan_route::release(device, ptr, &st)) st = vram_allocator_free(a, ptr);
    if (st == VRAM_OK) {
        if (size > 0) c10_symbols::report_usage(a, device, ptr, -(int64_t)size); /* (0: a block vram_torch recreated) */
    } else {
        /* A free PyTorch believes is ours but vram does not know: a bug somewhere; say it, do
         * not throw from a deleter. */
        fprintf(stderr, "vram: free of unknown pointer %p on cuda:%d: %s\n", ptr, device, vram_last_error());
    }
}

/* All the functions below return 0 on success, -1 with vram_torch_last_error() set (the calling
 * thread's message). */
VRAM_TORCH_API const char *vram_torch_last_error(void) { return g_error.c_str(); }

/* 1 if vram has an allocator on this device (it has served an allocation there). */
VRAM_TORCH_API int vram_torch_device_active(int device) {
    return device >= 0 && device < kMaxDevices && g_slots[device].alloc.load() != nullptr;
}

/* Starts the allocator on a device before its first allocation (e.g. to set a fraction). */
VRAM_TORCH_API int vram_torch_init_device(int device) { return get_allocator(device, true) ? 0 : -1; }

VRAM_TORCH_API int vram_torch_record_stream(void *ptr, int device, void *stream) {
    if (!ptr) return 0; /* an empty tensor's: no memory to keep (PyTorch's allocator ignores it too) */
    vram_allocator *a = get_allocator(device, false);
    if (void *arena = a ? plan_route::arena_of(device, ptr) : nullptr) ptr = arena;
    return a ? status_of(vram_allocator_record_stream(a, ptr, (vram_stream)stream)) : -1;
}

VRAM_TORCH_API int vram_torch_empty_cache(int device) {
    int rc = 0;
    for (int d = 0; d < kMaxDevices; d++) {
        if (device >= 0 && d != device) continue;
        vram_allocator *a = g_slots[d].alloc.load();
        vram_status st = VRAM_OK;
        if (a && !plan_route::empty_cache(d, &st)) st = vram_allocator_empty_cache(a);
        if (a && status_of(st) != 0) rc = -1;
    }
    return rc;
}

/* 0 when the configuration parses (VRAM_ALLOC_CONF, else PyTorch's settings: torch_conf.cpp;
 * each device's allocator reads it when it starts); else -1 with the parser's message, so that
 * enable() refuses a bad configuration before PyTorch allocates. */
VRAM_TORCH_API int vram_torch_check_config(void) {
    vram_alloc_config cfg;
    std::string notes;
    std::lock_guard<std::mutex> lock(g_mutex);
    return status_of(starting_config(&cfg, &notes));
}

/* The configuration device's allocator runs with, as a VRAM_ALLOC_CONF string (malloc'd; free
 * with vram_torch_string_free), or, before the device's first allocation, the one it would start
 * with now; NULL with the error for a bad device or configuration. */
VRAM_TORCH_API char *vram_torch_alloc_conf(int device) {
    if (!device_in_range(device)) return nullptr;
    vram_alloc_config cfg;
    std::string notes;
    vram_allocator *a = g_slots[device].alloc.load(std::memory_order_acquire);
    if (a) {
        vram_allocator_get_config(a, &cfg);
    } else {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (status_of(starting_config(&cfg, &notes)) != 0) return nullptr;
    }
    char text[VRAM_ALLOC_CONF_FORMAT_MAX];
    vram_alloc_config_format(&cfg, text, sizeof text);
    return strdup(text);
}

/* What of PyTorch's allocator settings an allocator starting now would leave out, and why
 * (malloc'd, "" when nothing; the plug-in prints it once when the first allocator starts); NULL
 * with the error for a bad configuration. */
VRAM_TORCH_API char *vram_torch_alloc_conf_notes(void) {
    vram_alloc_config cfg;
    std::string notes;
    std::lock_guard<std::mutex> lock(g_mutex);
    if (status_of(starting_config(&cfg, &notes)) != 0) return nullptr;
    return strdup(notes.c_str());
}

/* Changes every started allocator's configuration with `change` (given the device, its allocator
 * and the configuration it runs with; it calls vram_allocator_set_config or a setter built on
 * it), all or nothing: when one device refuses, those already changed are put back as they were
 * and the error names `what` and the device. 0, or -1 with the error. g_mutex held. */
static int change_started(const std::string &what,
                          const std::function<vram_status(int, vram_allocator *, const vram_alloc_config &)> &change) {
    std::vector<std::pair<vram_allocator *, vram_alloc_config>> changed;
    for (int d = 0; d < kMaxDevices; d++) {
        vram_allocator *a = g_slots[d].alloc.load(std::memory_order_acquire);
        if (!a) continue;
        vram_alloc_config now;
        vram_allocator_get_config(a, &now);
        if (change(d, a, now) != VRAM_OK) {
            set_error(what + " on cuda:" + std::to_string(d) + ": " + vram_last_error());
            for (auto &undo : changed) vram_allocator_set_config(undo.first, &undo.second);
            return -1;
        }
        changed.emplace_back(a, now);
    }
    return 0;
}

/* torch.cuda.memory.caching_allocator_enable under vram: caching off (every free returns its
 * memory at once; the caches are emptied) or back on, for every device's allocator, those that
 * start later included. 0, or -1 with the error, every allocator as it was (a device refuses
 * during a CUDA graph capture). */
VRAM_TORCH_API int vram_torch_set_caching(int on) {
    std::lock_guard<std::mutex> lock(g_mutex);
    int rc = change_started(std::string("caching_allocator_enable(") + (on ? "True" : "False") + ")",
                            [on](int, vram_allocator *a, const vram_alloc_config &) {
                                return vram_allocator_set_caching(a, on ? 1 : 0);
                            });
    if (rc == 0) g_caching = on ? 1 : 0;
    return rc;
}

/* torch.cuda.memory._set_allocator_settings under vram: checks `settings` (PyTorch's syntax),
 * applies them to the allocators already started (vram_allocator_set_config: rounding, splitting,
 * garbage collection, memory fraction, and whether new memory comes as pages or segments take
 * effect at once, as under PyTorch's own allocator) and keeps them for every allocator that
 * starts from now on. Returns (malloc'd) what they leave out: options vram lacks, and
 * expandable_segments:True for an allocator that started in the segments model ("" when nothing);
 * NULL with the error, nothing kept and every allocator as it was, for a malformed string or a bad
 * value, or when a started allocator refuses (a garbage collection threshold switched during a
 * CUDA graph capture on it). */
VRAM_TORCH_API char *vram_torch_set_allocator_settings(const char *settings) {
    if (!settings) {
        set_error("_set_allocator_settings: null settings");
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    vram_alloc_config cfg;
    std::string env_notes, notes, ignored;
    /* checked on what an allocator would start with now, which also says what they leave out */
    if (status_of(starting_config(&cfg, &env_notes)) != 0 ||
        status_of(torch_conf_apply(kSettingsSource, settings, &cfg, &notes)) != 0)
        return nullptr;
    auto apply = [&](int d, vram_allocator *a, const vram_alloc_config &now) {
        vram_alloc_config want = now;
        torch_conf_apply(kSettingsSource, settings, &want, &ignored);
        vram_status st = vram_allocator_set_config(a, &want);
        if (st == VRAM_ERR_INVALID_ARG && want.expandable_segments && !now.expandable_segments) {
            notes += std::string(notes.empty() ? "" : "; ") + "expandable_segments:True left out on cuda:" +
                     std::to_string(d) + ": its allocator started in the segments model (" + vram_last_error() + ")";
            want.expandable_segments = now.expandable_segments;
            st = vram_allocator_set_config(a, &want);
        }
        return st;
    };
    if (change_started(std::string(kSettingsSource) + "('" + settings + "')", apply) != 0) return nullptr;
    g_settings = g_settings.empty() ? settings : torch_conf_merge(g_settings, settings);
    return strdup(notes.c_str());
}

VRAM_TORCH_API int vram_torch_reset_peak(int device) {
    vram_allocator *a = get_allocator(device, false);
    if (!a) return -1;
    vram_allocator_reset_peak_stats(a);
    return 0;
}

VRAM_TORCH_API int vram_torch_reset_accumulated(int device) {
    vram_allocator *a = get_allocator(device, false);
    if (!a) return -1;
    vram_allocator_reset_accumulated_stats(a);
    return 0;
}

VRAM_TORCH_API int vram_torch_set_memory_fraction(double fraction, int device) {
    vram_allocator *a = get_allocator(device, true);
    return a ? status_of(vram_allocator_set_memory_fraction(a, fraction)) : -1;
}

/* The memory fraction in force on the device into *fraction (1 when none was set);
 * torch.cuda.get_per_process_memory_fraction under vram. For a device vram has not started on,
 * the fraction it would start with, without starting it (no CUDA context on a GPU only asked). */
VRAM_TORCH_API int vram_torch_get_memory_fraction(int device, double *fraction) {
    return with_allocator_or_idle(device, [&](vram_allocator *a) { *fraction = vram_allocator_memory_fraction(a); })
               ? 0 : -1;
}

/* Records the last `entries` allocator events on the device for snapshots (0 stops); device -1:
 * on every device, those whose allocators start later included, as
 * torch.cuda.memory._record_memory_history does for PyTorch's allocator (process-wide); all or
 * nothing over the started ones (change_started), and a ring of the size in use kept with its
 * events, as PyTorch keeps its history unless asked to clear it. */
VRAM_TORCH_API int vram_torch_set_history(unsigned entries, int device) {
    if (device != -1) {
        vram_allocator *a = get_allocator(device, true);
        return a ? status_of(vram_allocator_set_history(a, entries)) : -1;
    }
    if (entries > VRAM_HISTORY_MAX) { /* (refused here, not at every later allocator start) */
        set_error("history of " + std::to_string(entries) + " entries: at most " + std::to_string(VRAM_HISTORY_MAX));
        return -1;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    int rc = change_started("_record_memory_history", [entries](int, vram_allocator *a, const vram_alloc_config &now) {
        vram_alloc_config want = now;
        want.history_entries = entries;
        return vram_allocator_set_config(a, &want); /* a ring of another size: a new one, events dropped */
    });
    if (rc == 0) g_history = (long long)entries;
    return rc;
}

/* Events the device's history has recorded since it was started (vram_allocator_history_count),
 * or 0 when the device has no allocator yet. */
VRAM_TORCH_API long long vram_torch_history_count(int device) {
    vram_allocator *a = get_allocator(device, false);
    return a ? (long long)vram_allocator_history_count(a) : 0;
}

/* Keeps the Python stack of each allocation from now on (mode 1: the live blocks' only; 2: also
 * on the allocation events of the history; 3: also on the frees') or stops (0: the blocks'
 * stacks are dropped). Process-wide, as PyTorch's. -1 when this process has no Python whose
 * stacks can be read. */
VRAM_TORCH_API int vram_torch_set_stacks(int mode) {
    if (mode < 0 || mode > 3) {
        set_error("stack mode " + std::to_string(mode) + " is not 0-3");
        return -1;
    }
    if (mode && *py_stacks::unavailable()) {
        set_error(std::string("no Python stacks: ") + py_stacks::unavailable());
        return -1;
    }
    g_stacks.store(mode, std::memory_order_relaxed);
    if (!mode) py_stacks::blocks_clear();
    return 0;
}

/* The stack ids of n blocks by address (0: none recorded), into out[n]. */
VRAM_TORCH_API void vram_torch_block_stacks(const unsigned long long *addrs, size_t n, unsigned *out) {
    for (size_t i = 0; i < n; i++) out[i] = py_stacks::block_get(addrs[i]);
}

/* The frames of n stack ids as a JSON object {"id": [{"filename", "line", "name"}, ...]}
 * (innermost first); free with vram_torch_string_free. */
VRAM_TORCH_API char *vram_torch_stacks_json(const unsigned *ids, size_t n) {
    std::string json;
    try {
        json = py_stacks::frames_json(ids, n);
    } catch (...) {
        json.clear();
    }
    char *out = json.empty() ? nullptr : static_cast<char *>(malloc(json.size() + 1));
    if (!out) {
        set_error("host out of memory for the stacks' JSON");
        return nullptr;
    }
    memcpy(out, json.c_str(), json.size() + 1);
    return out;
}

/* Distinct stacks kept so far, and (into *dropped) gathers refused because the table was full. */
VRAM_TORCH_API long long vram_torch_stacks_count(unsigned long long *dropped) {
    if (dropped) *dropped = py_stacks::dropped();
    return (long long)py_stacks::count();
}

/* CUDA graph private pools (PyTorch's beginAllocateToPool / endAllocateToPool / releasePool,
 * which a pluggable allocator is never called for: vram_torch wraps torch.cuda.CUDAGraph's
 * capture_begin, capture_end and reset/destruction to call these). op: 0 begin, 1 end,
 * 2 release; pool id as PyTorch's MempoolId_t pair. vram's pools have one 64-bit id, so each pair
 * seen gets the next id from a table kept for the life of the process (a pool id may be begun
 * again after a release): distinct pairs never share a pool. */
static uint64_t pool_id(unsigned long long id_first, unsigned long long id_second) {
    if (!id_first && !id_second) return 0; /* no pool: refused by the allocator with its message */
    static std::map<std::pair<unsigned long long, unsigned long long>, uint64_t> ids;
    std::lock_guard<std::mutex> lock(g_mutex);
    return ids.emplace(std::make_pair(id_first, id_second), ids.size() + 1).first->second;
}

static int pool_status(vram_status st, unsigned long long id_first, unsigned long long id_second, uint64_t id) {
    if (st == VRAM_OK) return 0;
    set_error("PyTorch pool (" + std::to_string(id_first) + ", " + std::to_string(id_second) + "), vram pool " +
              std::to_string(id) + ": " + vram_last_error());
    return -1;
}

VRAM_TORCH_API int vram_torch_graph_pool(int op, unsigned long long id_first, unsigned long long id_second,
                                         int device) {
    vram_allocator *a = get_allocator(device, true);
    if (!a) return -1;
    uint64_t id = pool_id(id_first, id_second);
    vram_status st;
    switch (op) {
    case 0: st = vram_allocator_begin_pool(a, id); break;
    case 1: st = vram_allocator_end_pool(a, id); break;
    case 2: st = vram_allocator_release_pool(a, id); break;
    default: g_error = "graph_pool: unknown operation " + std::to_string(op); return -1;
    }
    return pool_status(st, id_first, id_second, id);
}

/* A begun pool and a stream. op 0: names the capture into the pool that PyTorch has begun on
 * `stream` (vram_allocator_bind_pool), so that captures under way at once in several threads
 * each take their own streams' memory. op 1: routes every allocation on `stream` to the pool
 * until its end, captured or not (vram_allocator_route_pool: PyTorch's
 * beginAllocateCurrentStreamToPool, with which CUDA graph trees run a graph's warm-up and copy
 * its inputs into the graph's pool). */
VRAM_TORCH_API int vram_torch_graph_pool_stream(int op, unsigned long long id_first, unsigned long long id_second,
                                                int device, void *stream) {
    vram_allocator *a = get_allocator(device, true);
    if (!a) return -1;
    uint64_t id = pool_id(id_first, id_second);
    vram_stream s = (vram_stream)(uintptr_t)stream;
    if (op != 0 && op != 1) {
        g_error = "graph_pool_stream: unknown operation " + std::to_string(op);
        return -1;
    }
    return pool_status(op ? vram_allocator_route_pool(a, id, s) : vram_allocator_bind_pool(a, id, s), id_first,
                       id_second, id);
}

/* The allocated blocks of a pool (vram_allocator_pool_blocks), all of them; none for a pool
 * that does not exist; false on another error. */
static bool pool_blocks(vram_allocator *a, uint64_t id, std::vector<vram_pool_block> &blocks) {
    size_t n = 0;
    vram_status st;
    while ((st = vram_allocator_pool_blocks(a, id, blocks.data(), blocks.size(), &n)) == VRAM_OK && n > blocks.size())
        blocks.resize(n);
    blocks.resize(st == VRAM_OK ? n : 0);
    return st == VRAM_OK || st == VRAM_ERR_NOT_FOUND;
}

/* PyTorch's checkPoolLiveAllocations: 1 when the pool's allocated blocks start exactly at the n
 * addresses of `ptrs` (no more, no fewer; blocks freed and waiting for other streams do not
 * count), 0 when not, -1 on error. */
VRAM_TORCH_API int vram_torch_graph_pool_live_equal(unsigned long long id_first, unsigned long long id_second,
                                                    int device, const unsigned long long *ptrs, size_t n) {
    vram_allocator *a = get_allocator(device, true);
    if (!a) return -1;
    std::vector<vram_pool_block> blocks;
    if (!pool_blocks(a, pool_id(id_first, id_second), blocks)) {
        set_error(vram_last_error());
        return -1;
    }
    std::vector<unsigned long long> want(ptrs, ptrs + n), live;
    for (const vram_pool_block &b : blocks) live.push_back(b.addr);
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    std::sort(live.begin(), live.end());
    return want == live ? 1 : 0;
}

/* PyTorch's getCheckpointState: the pool's allocated blocks (vram_allocator_pool_blocks), five
 * numbers each (address, size, requested bytes, stream, tag), up to `cap` blocks into `out`,
 * how many there are into *n. */
VRAM_TORCH_API int vram_torch_graph_pool_blocks(unsigned long long id_first, unsigned long long id_second, int device,
                                                unsigned long long *out, size_t cap, size_t *n) {
    vram_allocator *a = get_allocator(device, true);
    if (!a) return -1;
    uint64_t id = pool_id(id_first, id_second);
    std::vector<vram_pool_block> blocks(cap);
    vram_status st = vram_allocator_pool_blocks(a, id, blocks.data(), cap, n);
    for (size_t i = 0; st == VRAM_OK && i < std::min(cap, *n); i++) {
        const vram_pool_block &b = blocks[i];
        unsigned long long *o = out + 5 * i;
        o[0] = b.addr, o[1] = b.size, o[2] = b.requested, o[3] = (unsigned long long)b.stream, o[4] = b.tag;
    }
    return pool_status(st, id_first, id_second, id);
}

/* PyTorch's setCheckpointPoolState, the allocator's part: makes the pool's allocated blocks the
 * n given, five numbers each as vram_torch_graph_pool_blocks gives them
 * (vram_allocator_pool_recreate); created[i] says whether block i was carved again (1) or was
 * allocated already (0). */
VRAM_TORCH_API int vram_torch_graph_pool_recreate(unsigned long long id_first, unsigned long long id_second, int device,
                                                  const unsigned long long *in, size_t n, unsigned char *created) {
    vram_allocator *a = get_allocator(device, true);
    if (!a) return -1;
    uint64_t id = pool_id(id_first, id_second);
    std::vector<vram_pool_block> blocks(n);
    for (size_t i = 0; i < n; i++) {
        const unsigned long long *b = in + 5 * i;
        blocks[i] = vram_pool_block{b[0], b[1], b[2], (vram_stream)b[3], (vram_tag)b[4]};
    }
    return pool_status(vram_allocator_pool_recreate(a, id, blocks.data(), n, created), id_first, id_second, id);
}

VRAM_TORCH_API const char *vram_torch_oom_report(int device) {
    if (device < 0 || device >= kMaxDevices) return "";
    return g_slots[device].oom_report.c_str();
}

VRAM_TORCH_API void vram_torch_string_free(char *s) { free(s); }

namespace {
/* a's statistics as "name value" lines with PyTorch's memory_stats() key names, plus vram's
 * per-tag figures as "tags.<name>.<stat>.<field>". */
std::string stats_lines(vram_allocator *a) {
    vram_stats s;
    vram_allocator_get_stats(a, &s);
    std::string out;
    char line[256];
    auto stat = [&](const std::string &name, const vram_stat &v) {
        snprintf(line, sizeof line, "%s.current %lld\n%s.peak %lld\n%s.allocated %lld\n%s.freed %lld\n", name.c_str(),
                 (long long)v.current, name.c_str(), (long long)v.peak, name.c_str(), (long long)v.allocated, name.c_str(),
                 (long long)v.freed);
        out += line;
    };
    const char *pools[3] = {"all", "small_pool", "large_pool"};
    struct {
        const char *name;
        const vram_stat *arr;
    } arrays[] = {{"allocation", s.allocation},         {"segment", s.segment},
                  {"active", s.active},                 {"inactive_split", s.inactive_split},
                  {"allocated_bytes", s.allocated_bytes}, {"reserved_bytes", s.reserved_bytes},
                  {"active_bytes", s.active_bytes},     {"inactive_split_bytes", s.inactive_split_bytes},
                  {"requested_bytes", s.requested_bytes}};
    for (auto &arr : arrays)
        for (int p = 0; p < 3; p++) stat(std::string(arr.name) + "." + pools[p], arr.arr[p]);
    stat("oversize_allocations", s.oversize_allocations);
    stat("oversize_segments", s.oversize_segments);
    snprintf(line, sizeof line,
             "num_alloc_retries %llu\nnum_ooms %llu\nnum_sync_all_streams %llu\nnum_device_alloc %llu\n"
             "num_device_free %llu\nmax_split_size %lld\n",
             (unsigned long long)s.num_alloc_retries, (unsigned long long)s.num_ooms,
             (unsigned long long)s.num_sync_all_streams, (unsigned long long)s.num_device_alloc,
             (unsigned long long)s.num_device_free, (long long)s.max_split_size);
    out += line;
    for (uint32_t t = 0; t < s.num_tags && t < VRAM_TAG_MAX; t++) {
        const char *name = vram_allocator_tag_name(a, t);
        std::string base = std::string("tags.") + (name ? name : std::to_string(t));
        stat(base + ".allocation", s.tags[t].allocation);
        stat(base + ".allocated_bytes", s.tags[t].allocated_bytes);
        stat(base + ".requested_bytes", s.tags[t].requested_bytes);
    }
    return out;
}

}  // namespace

/* The device's statistics as "name value" lines (stats_lines; for a device vram has not started
 * on, an idle allocator's). Caller frees with vram_torch_string_free. */
VRAM_TORCH_API char *vram_torch_stats_text(int device) {
    std::string text;
    if (!with_allocator_or_idle(device, [&](vram_allocator *a) { text = stats_lines(a); })) return nullptr;
    return strdup(text.c_str());
}

/* The device's memory summary (for a device vram has not started on, an idle allocator's figures
 * under the device's number). Caller frees with vram_torch_string_free. */
VRAM_TORCH_API char *vram_torch_summary(int device, int abbreviated) {
    char *out = nullptr;
    vram_status st = VRAM_OK;
    if (!with_allocator_or_idle(device, [&](vram_allocator *a) { st = vram_memory_summary(a, abbreviated, &out); }))
        return nullptr;
    if (st != VRAM_OK) {
        set_error(vram_last_error());
        return nullptr;
    }
    return out;
}

VRAM_TORCH_API char *vram_torch_snapshot_json(int device) {
    vram_allocator *a = get_allocator(device, false);
    if (!a) return nullptr;
    vram_snapshot *snap = nullptr;
    if (vram_allocator_snapshot(a, &snap) != VRAM_OK) {
        set_error(vram_last_error());
        return nullptr;
    }
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    vram_status st = f ? vram_snapshot_write_json(snap, f) : VRAM_ERR_IO;
    if (f) fclose(f);
    vram_snapshot_free(snap);
    if (st != VRAM_OK) {
        set_error(f ? vram_last_error() : "open_memstream failed");
        free(buf);
        return nullptr;
    }
    return buf;
}

/* The step plan's counters on `device` (VRAM_STEP_PLAN=1, plan_route.h): requests, served,
 * missed, plans begun, retired, last period, last planned, last arena bytes, its floor, the
 * arena now, its live bytes. 0, or -1 where the device has no plan. */
VRAM_TORCH_API int vram_torch_step_plan_stats(int device, unsigned long long out[11]) {
    if (!out || !plan_route::stats(device, out)) {
        set_error("no step plan on cuda:" + std::to_string(device) + " (VRAM_STEP_PLAN=1 starts one)");
        return -1;
    }
    return 0;
}

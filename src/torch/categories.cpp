/* categories.cpp — memory by category for PyTorch programs: what the plug-in's tags say each
 * block is, and windows of their peaks.
 *
 * Every block vram hands PyTorch carries one tag, so the tags' bytes add up to the allocated
 * bytes at every moment. vram_torch (python/vram_torch/categories.py) sets the tag new blocks get
 * (vram_torch_set_default_tag: "temporary" inside forward, backward and the optimizer step,
 * "other" outside, where inputs are made) and re-tags blocks as PyTorch reveals what they are
 * (vram_torch_retag: a module's parameters and buffers, .grad tensors, optimizer state, tensors
 * saved for backward; vram_torch_retag_all: whatever is still a temporary when backward starts).
 *
 * A window is a stretch of the program (one phase of one step) over which the plug-in keeps, per
 * device: the peak of allocated bytes with each tag's bytes at that moment, the peak of reserved
 * bytes with the allocated bytes then, and each tag's own peak. Bytes grow only at an allocation
 * or a re-tag, so observing after each of them sees every peak. vram_torch_window reads a window
 * and, with reset, starts the next at the current figures. Windows cost a statistics copy per
 * allocation, so they are on only after vram_torch_set_windows(1).
 */
#include "categories.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

extern "C" {
#include "vram/snapshot.h"
#include "vram/stats.h"
#include "vram/summary.h"
}

#define VRAM_TORCH_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kDevices = 64;
/* The window's layout, as vram_torch_window writes it (vram_torch/categories.py reads the same):
 * 6 figures, then VRAM_TAG_MAX tag bytes at the allocated peak, each tag's own peak, each tag now. */
enum { W_PEAK_ALLOCATED, W_RESERVED_AT_PEAK_ALLOCATED, W_PEAK_RESERVED, W_ALLOCATED_AT_PEAK_RESERVED,
       W_ALLOCATED_NOW, W_RESERVED_NOW, W_FIXED };
constexpr int kWindowSize = W_FIXED + 3 * VRAM_TAG_MAX;

struct Window {
    std::mutex lock;
    bool started = false;
    long long v[kWindowSize] = {};
};

Window g_windows[kDevices];
std::atomic<int> g_windows_on{0};
std::atomic<uint32_t> g_default_tag{VRAM_TAG_OTHER};

/* Starts window w at the allocator's figures now. w->lock held. */
void window_start(Window *w, const vram_stats &s) {
    memset(w->v, 0, sizeof w->v);
    long long alloc = s.allocated_bytes[VRAM_POOL_ALL].current, res = s.reserved_bytes[VRAM_POOL_ALL].current;
    w->v[W_PEAK_ALLOCATED] = w->v[W_ALLOCATED_AT_PEAK_RESERVED] = w->v[W_ALLOCATED_NOW] = alloc;
    w->v[W_PEAK_RESERVED] = w->v[W_RESERVED_AT_PEAK_ALLOCATED] = w->v[W_RESERVED_NOW] = res;
    for (int t = 0; t < VRAM_TAG_MAX; t++) {
        long long b = s.tags[t].allocated_bytes.current;
        w->v[W_FIXED + t] = w->v[W_FIXED + VRAM_TAG_MAX + t] = w->v[W_FIXED + 2 * VRAM_TAG_MAX + t] = b;
    }
    w->started = true;
}

/* Takes the figures of `s` into window w. w->lock held. */
void window_take(Window *w, const vram_stats &s) {
    if (!w->started) {
        window_start(w, s);
        return;
    }
    long long alloc = s.allocated_bytes[VRAM_POOL_ALL].current, res = s.reserved_bytes[VRAM_POOL_ALL].current;
    w->v[W_ALLOCATED_NOW] = alloc;
    w->v[W_RESERVED_NOW] = res;
    if (alloc > w->v[W_PEAK_ALLOCATED]) {
        w->v[W_PEAK_ALLOCATED] = alloc;
        w->v[W_RESERVED_AT_PEAK_ALLOCATED] = res;
        for (int t = 0; t < VRAM_TAG_MAX; t++) w->v[W_FIXED + t] = s.tags[t].allocated_bytes.current;
    }
    if (res > w->v[W_PEAK_RESERVED]) {
        w->v[W_PEAK_RESERVED] = res;
        w->v[W_ALLOCATED_AT_PEAK_RESERVED] = alloc;
    }
    for (int t = 0; t < VRAM_TAG_MAX; t++) {
        long long b = s.tags[t].allocated_bytes.current;
        w->v[W_FIXED + 2 * VRAM_TAG_MAX + t] = b;
        if (b > w->v[W_FIXED + VRAM_TAG_MAX + t]) w->v[W_FIXED + VRAM_TAG_MAX + t] = b;
    }
}

thread_local std::string g_cat_error;

bool device_ok(int device) {
    if (device >= 0 && device < kDevices) return true;
    g_cat_error = "device index " + std::to_string(device) + " out of range";
    return false;
}

} // namespace

namespace categories {

vram_tag default_tag() { return g_default_tag.load(std::memory_order_relaxed); }

void on_new_allocator(vram_allocator *a) {
    vram_tag t;
    if (vram_allocator_tag_register(a, "buffer", &t) != VRAM_OK)
        fprintf(stderr, "vram: no \"buffer\" tag: %s\n", vram_last_error());
}

void observe(vram_allocator *a, int device) {
    if (!g_windows_on.load(std::memory_order_relaxed) || device < 0 || device >= kDevices) return;
    vram_stats s;
    vram_allocator_get_stats(a, &s);
    Window *w = &g_windows[device];
    std::lock_guard<std::mutex> lock(w->lock);
    window_take(w, s);
}

std::string oom_lines(vram_allocator *a) {
    if (!g_windows_on.load(std::memory_order_relaxed)) return "";
    vram_stats s;
    vram_allocator_get_stats(a, &s);
    std::string out = "vram categories at the failure:";
    char size[32];
    for (uint32_t t = 0; t < s.num_tags && t < VRAM_TAG_MAX; t++) {
        const char *name = vram_allocator_tag_name(a, t);
        vram_format_size((uint64_t)s.tags[t].allocated_bytes.current, size, sizeof size);
        out += std::string(t ? ", " : " ") + (name ? name : "?") + " " + size;
    }
    long long free_bytes = s.reserved_bytes[VRAM_POOL_ALL].current - s.allocated_bytes[VRAM_POOL_ALL].current;
    vram_format_size((uint64_t)(free_bytes > 0 ? free_bytes : 0), size, sizeof size);
    out += std::string("\nvram reserved but free: ") + size + " (vram_torch.explain_oom() plans the remedies)";
    return out;
}

} // namespace categories

/* The last error of this file's functions, on this thread. */
VRAM_TORCH_API const char *vram_torch_categories_error(void) { return g_cat_error.c_str(); }

/* The tag new allocations get from now on (every thread: backward allocates on the autograd
 * engine's threads). -1 for a tag out of range. */
VRAM_TORCH_API int vram_torch_set_default_tag(int tag) {
    if (tag < 0 || tag >= VRAM_TAG_MAX) {
        g_cat_error = "tag " + std::to_string(tag) + " out of range";
        return -1;
    }
    g_default_tag.store((uint32_t)tag);
    return 0;
}

/* Re-tags the live block at ptr as `tag` where its tag is one of `from_mask` (bit t: tag t):
 * 1 re-tagged, 0 left (not a live block of vram's, or another tag), -1 bad device or tag. */
VRAM_TORCH_API int vram_torch_retag(void *ptr, int device, unsigned from_mask, int tag) {
    if (!device_ok(device)) return -1;
    if (tag < 0 || tag >= VRAM_TAG_MAX) {
        g_cat_error = "tag " + std::to_string(tag) + " out of range";
        return -1;
    }
    vram_allocator *a = plugin_allocator(device);
    size_t size, requested;
    vram_tag now;
    if (!a || !ptr || vram_allocator_block_info(a, ptr, &size, &requested, &now) != VRAM_OK) return 0;
    if (now == (vram_tag)tag || now >= 32 || !(from_mask & (1u << now))) return 0;
    if (vram_allocator_set_tag(a, ptr, (vram_tag)tag) != VRAM_OK) return 0; /* freed meanwhile */
    categories::observe(a, device);
    return 1;
}

/* Re-tags every live block of the device tagged `from` as `to`: how many, or -1. */
VRAM_TORCH_API long long vram_torch_retag_all(int device, int from, int to) {
    if (!device_ok(device)) return -1;
    if (from < 0 || from >= VRAM_TAG_MAX || to < 0 || to >= VRAM_TAG_MAX) {
        g_cat_error = "tag out of range";
        return -1;
    }
    vram_allocator *a = plugin_allocator(device);
    if (!a) return 0;
    vram_snapshot *snap = nullptr;
    if (vram_allocator_snapshot(a, &snap) != VRAM_OK) {
        g_cat_error = vram_last_error();
        return -1;
    }
    long long n = 0;
    for (size_t i = 0; i < snap->num_blocks; i++) {
        const vram_snapshot_block &b = snap->blocks[i];
        if (b.state == VRAM_BLOCK_ACTIVE_ALLOCATED && b.tag == (vram_tag)from &&
            vram_allocator_set_tag(a, (void *)(uintptr_t)b.address, (vram_tag)to) == VRAM_OK)
            n++;
    }
    vram_snapshot_free(snap);
    if (n) categories::observe(a, device);
    return n;
}

/* Turns the windows on (every device's starts at its figures now) or off. */
VRAM_TORCH_API void vram_torch_set_windows(int on) {
    for (int d = 0; d < kDevices; d++) {
        std::lock_guard<std::mutex> lock(g_windows[d].lock);
        g_windows[d].started = false;
    }
    g_windows_on.store(on ? 1 : 0);
}

/* The device's window into out[0..n) (n >= the layout's size, returned), and with reset the next
 * window starts at the figures now. The layout's size when out is NULL; -1 for a bad device or a
 * short out. A device vram has not started on reads as zeros. */
VRAM_TORCH_API int vram_torch_window(int device, int reset, long long *out, size_t n) {
    if (!out) return kWindowSize;
    if (!device_ok(device)) return -1;
    if (n < (size_t)kWindowSize) {
        g_cat_error = "window needs " + std::to_string(kWindowSize) + " numbers";
        return -1;
    }
    vram_allocator *a = plugin_allocator(device);
    vram_stats s;
    if (a) vram_allocator_get_stats(a, &s);
    Window *w = &g_windows[device];
    std::lock_guard<std::mutex> lock(w->lock);
    if (!a) {
        memset(out, 0, sizeof(long long) * kWindowSize);
        return kWindowSize;
    }
    window_take(w, s);
    memcpy(out, w->v, sizeof(long long) * kWindowSize);
    if (reset) window_start(w, s);
    return kWindowSize;
}

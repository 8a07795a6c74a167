/* fake_c10.cpp — a stand-in libc10.so with c10's two memory-profiling hooks, for the plug-in's
 * CPU test (tests/torch_plugin_hooks.cpp): c10::memoryProfilingEnabled() answers what the test
 * set (fake_c10_set_profiling), c10::reportMemoryUsageToProfiler records each report, which
 * the test reads back (fake_c10_report), and c10::reportOutOfMemoryToProfiler counts the
 * out-of-memory reports (fake_c10_ooms). Same names and signatures as c10's, so the plug-in
 * resolves them exactly as it does from PyTorch's library. */
#include <cstddef>
#include <cstdint>
#include <vector>

namespace c10 {

struct Device { /* c10::Device's layout: a DeviceType (int8_t enum) and an index */
    int8_t type, index;
};

namespace {
bool profiling;
struct Report {
    void *ptr;
    int64_t bytes;
    size_t allocated, reserved;
    Device device;
};
std::vector<Report> reports;
} // namespace

__attribute__((visibility("default"))) bool memoryProfilingEnabled() { return profiling; }

__attribute__((visibility("default"))) void reportMemoryUsageToProfiler(void *ptr, int64_t alloc_size,
                                                                         size_t total_allocated, size_t total_reserved,
                                                                         Device device) {
    reports.push_back(Report{ptr, alloc_size, total_allocated, total_reserved, device});
}

int64_t oom_bytes, ooms;

__attribute__((visibility("default"))) void reportOutOfMemoryToProfiler(int64_t alloc_size, size_t, size_t, Device) {
    ooms++;
    oom_bytes = alloc_size;
}

} // namespace c10

/* How many out-of-memory reports came, and the last one's bytes into *bytes. */
extern "C" __attribute__((visibility("default"))) int64_t fake_c10_ooms(int64_t *bytes) {
    *bytes = c10::oom_bytes;
    return c10::ooms;
}

extern "C" __attribute__((visibility("default"))) void fake_c10_set_profiling(int on) { c10::profiling = on != 0; }

/* Report i (0 = oldest) into the out-parameters; 0 when there is no such report. */
extern "C" __attribute__((visibility("default"))) int fake_c10_report(size_t i, void **ptr, int64_t *bytes,
                                                                      size_t *allocated, size_t *reserved, int *type,
                                                                      int *index) {
    if (i >= c10::reports.size()) return 0;
    const auto &r = c10::reports[i];
    *ptr = r.ptr;
    *bytes = r.bytes;
    *allocated = r.allocated;
    *reserved = r.reserved;
    *type = r.device.type;
    *index = r.device.index;
    return 1;
}

extern "C" __attribute__((visibility("default"))) size_t fake_c10_reports(void) { return c10::reports.size(); }

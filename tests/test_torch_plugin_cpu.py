"""test_torch_plugin_cpu.py — libvram_torch.so's C interface without PyTorch or a GPU: the
library is loaded with ctypes over the fake driver (tests/fakes/fake_cuda.c via VRAM_LIBCUDA)
and driven as CUDAPluggableAllocator and vram_torch would drive it: allocators created lazily
per device, alloc/free, PyTorch-named statistics, reset of peaks, empty_cache returning memory
to the driver, memory fraction, record_stream, two devices used at once (the fake driver has
two), summary and snapshot, CUDA graph pools per device. (Out of memory throws a
C++ exception meant for PyTorch's frames, so it is tested on the GPU, tests/gpu/.)
Usage: test_torch_plugin_cpu.py LIBVRAM_TORCH FAKE_LIBCUDA
"""
import ctypes
import json
import os
import sys
import threading

if os.environ.get("VRAM_TEST_SANITIZED") and not os.environ.get("VRAM_TEST_PRELOADED"):
    print("SKIP: the sanitizer build's library cannot be loaded into an uninstrumented python "
          "without the sanitizers' runtimes preloaded (tests/extra.cmake)")
    sys.exit(77)
lib_path, fake = sys.argv[1], sys.argv[2]
os.environ["VRAM_LIBCUDA"] = fake
os.environ["FAKE_CUDA_MEMORY"] = str(1 << 30)
os.environ["FAKE_CUDA_DEVICES"] = "2"
os.environ["VRAM_ALLOC_CONF"] = "expandable_segments:True"
lib = ctypes.CDLL(lib_path)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done, take_string  # noqa: E402

# Only the plug-in's own entry points are exported (src/torch/exports.map): libvram inside it stays
# local, so it cannot clash with another libvram (or PyTorch's symbols) in the process.
for name, exported in (("vram_torch_alloc", True), ("vram_torch_patch_pluggable", True),
                       ("vram_allocator_malloc", False), ("vram_device_open", False)):
    check(hasattr(lib, name) == exported, "%s %s" % (name, "exported" if exported else "not exported"))

vp, c_int = ctypes.c_void_p, ctypes.c_int
lib.vram_torch_alloc.restype, lib.vram_torch_alloc.argtypes = vp, [ctypes.c_ssize_t, c_int, vp]
lib.vram_torch_free.restype, lib.vram_torch_free.argtypes = None, [vp, ctypes.c_ssize_t, c_int, vp]
for name in ("vram_torch_stats_text", "vram_torch_snapshot_json"):
    getattr(lib, name).restype, getattr(lib, name).argtypes = vp, [c_int]
lib.vram_torch_summary.restype, lib.vram_torch_summary.argtypes = vp, [c_int, c_int]
lib.vram_torch_string_free.argtypes = [vp]
lib.vram_torch_last_error.restype = ctypes.c_char_p
lib.vram_torch_set_memory_fraction.argtypes = [ctypes.c_double, c_int]
lib.vram_torch_record_stream.argtypes = [vp, c_int, vp]


def take(ptr):
    return take_string(lib, ptr)


def stats(device=0):
    text = take(lib.vram_torch_stats_text(device))
    return {k: int(v) for k, _, v in (l.rpartition(" ") for l in text.splitlines())} if text else {}


check(lib.vram_torch_device_active(0) == 0, "no allocator before the first allocation")
idle = stats()
check(len(idle) > 50 and idle["allocated_bytes.all.peak"] == 0 and idle["max_split_size"] == -1
      and lib.vram_torch_device_active(0) == 0, "before it, every statistic at zero, and still no allocator")
# A request for no bytes (PyTorch asks for each empty tensor) gets a null pointer and no memory,
# as from PyTorch's own allocator; its free and record_stream are no-ops.
check(lib.vram_torch_alloc(0, 0, 0x1000) is None, "a request for 0 bytes returns a null pointer")
lib.vram_torch_free(None, 0, 0, 0x1000)
check(lib.vram_torch_record_stream(None, 0, 0x2000) == 0, "record_stream of an empty tensor's null pointer")
check(lib.vram_torch_device_active(0) == 0, "and none of them starts an allocator or counts anything")
ptrs = [lib.vram_torch_alloc(n, 0, 0x1000) for n in (1000, 5 << 20, 64 << 20)]
check(all(ptrs) and len(set(ptrs)) == 3, "three distinct blocks: %s" % ptrs)
check(lib.vram_torch_device_active(0) == 1, "allocator created on first use")
s = stats()
check(s.get("requested_bytes.all.current") == 1000 + (5 << 20) + (64 << 20), "requested bytes %s" % s.get("requested_bytes.all.current"))
check(s.get("allocation.all.current") == 3 and s.get("allocation.small_pool.current") == 1, "allocation counts")
check(lib.vram_torch_alloc(0, 0, 0x1000) is None and stats()["allocation.all.allocated"] == s["allocation.all.allocated"],
      "a request for 0 bytes counts no allocation once the allocator runs either")
check(s.get("reserved_bytes.all.current", 0) >= s["allocated_bytes.all.current"], "reserved >= allocated")
check("tags.other.allocated_bytes.current" in s, "per-tag statistics")
for p, n in zip(ptrs, (1000, 5 << 20, 64 << 20)):
    lib.vram_torch_free(p, n, 0, 0x1000)
s = stats()
check(s["allocated_bytes.all.current"] == 0 and s["allocated_bytes.all.peak"] > 0, "all freed, peak kept")
check(lib.vram_torch_reset_peak(0) == 0 and stats()["allocated_bytes.all.peak"] == 0, "reset_peak_memory_stats")
check(lib.vram_torch_empty_cache(-1) == 0, "empty_cache")
check(stats()["reserved_bytes.all.current"] == 0, "empty_cache returns everything")
# record_stream: the block stays active (pending its event on the other stream) after free.
p = lib.vram_torch_alloc(1 << 20, 0, 0x1000)
check(lib.vram_torch_record_stream(p, 0, 0x2000) == 0, "record_stream")
check(lib.vram_torch_record_stream(0x1234, 0, 0x2000) != 0, "record_stream of an unknown pointer fails")
lib.vram_torch_free(p, 1 << 20, 0, 0x1000)
s = stats()
check(s["allocated_bytes.all.current"] == 0 and s["active_bytes.all.current"] == 1 << 20,
      "freed but active until the other stream's event: active %d" % s["active_bytes.all.current"])
check(lib.vram_torch_set_memory_fraction(1.5, 0) != 0, "fraction above 1 refused")
check(b"memory fraction 1.5 is not in (0, 1]" in lib.vram_torch_last_error(),
      "with the allocator's reason, not a stale error: %s" % lib.vram_torch_last_error())
check(lib.vram_torch_set_memory_fraction(0.5, 0) == 0, "fraction 0.5")
frac = ctypes.c_double()
check(lib.vram_torch_get_memory_fraction(0, ctypes.byref(frac)) == 0 and frac.value == 0.5, "fraction read: %g" % frac.value)
check(lib.vram_torch_get_memory_fraction(-1, ctypes.byref(frac)) != 0, "fraction of a bad device refused")
check(lib.vram_torch_init_device(7) != 0 and b"cuda:7" in lib.vram_torch_last_error(), "a device the driver lacks: %s" % lib.vram_torch_last_error())
# A second device: its own allocator and memory, created on its first allocation.
fake_lib = ctypes.CDLL(fake)  # the library the plug-in loaded (same path, same state)
fake_lib.fake_cuda_used.restype, fake_lib.fake_cuda_used.argtypes = ctypes.c_uint64, [c_int]
s0 = stats(0)
check(lib.vram_torch_device_active(1) == 0, "cuda:1 has no allocator before its first allocation")
q = lib.vram_torch_alloc(64 << 20, 1, 0x1000)
check(q and lib.vram_torch_device_active(1) == 1, "an allocation on cuda:1 starts its allocator")
s1 = stats(1)
check(s1.get("allocated_bytes.all.current") == 64 << 20, "cuda:1 counts its block: %s" % s1.get("allocated_bytes.all.current"))
check(stats(0) == s0, "cuda:0's statistics do not move")
check(fake_lib.fake_cuda_used(1) == s1["reserved_bytes.all.current"], "cuda:1's memory is on cuda:1: %d" % fake_lib.fake_cuda_used(1))
lib.vram_torch_free(q, 64 << 20, 0, 0x1000)  # the wrong device: refused (a message on stderr), nothing freed
check(stats(1)["allocated_bytes.all.current"] == 64 << 20 and stats(0) == s0, "a free naming the wrong device frees nothing")
lib.vram_torch_free(q, 64 << 20, 1, 0x1000)
used0 = fake_lib.fake_cuda_used(0)
check(lib.vram_torch_empty_cache(1) == 0 and fake_lib.fake_cuda_used(1) == 0, "empty_cache(1) returns cuda:1's cache")
check(fake_lib.fake_cuda_used(0) == used0, "and leaves cuda:0's")
# Both devices at once, one thread each (ctypes releases the GIL around each call).
failed = []


def churn(device):
    held = []
    for i in range(3000):
        if len(held) >= 40 or (held and (i * 7919) % 3 == 0):  # at most 40 blocks (120 MiB) live
            ptr, n = held.pop((i * 31) % len(held))
            lib.vram_torch_free(ptr, n, device, 0x1000)
        else:
            n = ((i * 104729) % (3 << 20)) + 1
            ptr = lib.vram_torch_alloc(n, device, 0x1000)
            if ptr:
                held.append((ptr, n))
            else:
                failed.append((device, n))
    for ptr, n in held:
        lib.vram_torch_free(ptr, n, device, 0x1000)


threads = [threading.Thread(target=churn, args=(d,)) for d in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(not failed, "no allocation failed on either device: %s" % failed[:3])
for d in (0, 1):
    sd = stats(d)
    check(sd["allocated_bytes.all.current"] == (0 if d else s0["allocated_bytes.all.current"]),
          "cuda:%d: everything the thread allocated is freed" % d)
    check(fake_lib.fake_cuda_used(d) == sd["reserved_bytes.all.current"],
          "cuda:%d: driver memory %d = reserved %d" % (d, fake_lib.fake_cuda_used(d), sd["reserved_bytes.all.current"]))
summary = take(lib.vram_torch_summary(0, 0))
if summary is None:
    err = lib.vram_torch_last_error().decode()
    check("no memory summary module" in err, "summary missing only because the module is: %s" % err)
    print("summary: not in this libvram yet")
else:
    check("Allocated memory" in summary, "summary table")
snap = take(lib.vram_torch_snapshot_json(0))
if snap is None:
    err = lib.vram_torch_last_error().decode()
    check("no snapshot module" in err, "snapshot missing only because the module is: %s" % err)
    print("snapshot: not in this libvram yet")
else:
    check("segments" in json.loads(snap), "snapshot JSON")
# The event history at run time (torch.cuda.memory._record_memory_history under vram).
lib.vram_torch_set_history.argtypes = [ctypes.c_uint, c_int]
check(lib.vram_torch_set_history(16, 0) == 0, "history on")
p = lib.vram_torch_alloc(3 << 20, 0, 0x1000)
lib.vram_torch_free(p, 3 << 20, 0, 0x1000)
trace = json.loads(take(lib.vram_torch_snapshot_json(0)))["device_traces"][0]
check([e["action"] for e in trace][:3] == ["alloc", "free_requested", "free_completed"] and trace[0]["size"] == 3 << 20,
      "the snapshot's trace has the allocation and its free: %s" % [e["action"] for e in trace])
check(lib.vram_torch_set_history(1 << 30, 0) != 0 and b"more than" in lib.vram_torch_last_error(), "too many entries refused")
check(lib.vram_torch_set_history(1 << 30, -1) != 0 and b"at most" in lib.vram_torch_last_error(),
      "and for every device, before any allocator takes it: %s" % lib.vram_torch_last_error())
check(lib.vram_torch_set_history(0, 0) == 0 and json.loads(take(lib.vram_torch_snapshot_json(0)))["device_traces"] == [[]],
      "history off: no events")
# CUDA graph private pools through the C interface, per device: a capture on cuda:1 keeps its
# memory there (not on cuda:0), through empty_cache, until the pool is released; bad calls fail.
lib.vram_torch_graph_pool.argtypes = [c_int, ctypes.c_ulonglong, ctypes.c_ulonglong, c_int]


def reserved(device):
    return int(dict(l.split() for l in take(lib.vram_torch_stats_text(device)).splitlines())["reserved_bytes.all.current"])


lib.vram_torch_empty_cache(-1)
fake_lib.fake_cuda_set_capturing.argtypes = [ctypes.c_size_t]
fake_lib.fake_cuda_set_capturing(0x1000)  # the driver reports stream 0x1000 as capturing, as in a capture
check(lib.vram_torch_graph_pool(0, 0, 5, 1) == 0, "begin a capture into pool (0, 5) on cuda:1")
# settings that switch the free path are refused by an allocator in a capture: the call fails and
# leaves every device as it was (cuda:0, before cuda:1 in order, is put back)
lib.vram_torch_set_allocator_settings.restype = ctypes.c_void_p
lib.vram_torch_set_allocator_settings.argtypes = [ctypes.c_char_p]
lib.vram_torch_alloc_conf.restype = ctypes.c_void_p
lib.vram_torch_alloc_conf.argtypes = [c_int]
confs = [take(lib.vram_torch_alloc_conf(d)) for d in (0, 1)]
check(lib.vram_torch_set_allocator_settings(b"garbage_collection_threshold:0.7,roundup_power2_divisions:4") is None
      and b"on cuda:1" in lib.vram_torch_last_error() and b"capture" in lib.vram_torch_last_error(),
      "settings refused during cuda:1's capture: %s" % lib.vram_torch_last_error())
check([take(lib.vram_torch_alloc_conf(d)) for d in (0, 1)] == confs, "and both devices left as they were: %s" % confs)
lib.vram_torch_set_caching.argtypes = [c_int]
check(lib.vram_torch_set_caching(0) != 0 and b"caching_allocator_enable(False) on cuda:1" in lib.vram_torch_last_error()
      and [take(lib.vram_torch_alloc_conf(d)) for d in (0, 1)] == confs,
      "caching_allocator_enable(False) refused during the capture, both devices as they were: %s"
      % lib.vram_torch_last_error())
g = lib.vram_torch_alloc(8 << 20, 1, 0x1000)
lib.vram_torch_free(g, 8 << 20, 1, 0x1000)
side = lib.vram_torch_alloc(6 << 20, 1, 0x2000)  # another stream, not recorded by the capture
lib.vram_torch_free(side, 6 << 20, 1, 0x2000)
# a second capture at once (another thread's, on its own stream), named by its stream: its
# allocations go to its own pool
lib.vram_torch_graph_pool_stream.argtypes = [c_int, ctypes.c_ulonglong, ctypes.c_ulonglong, c_int, ctypes.c_void_p]
fake_lib.fake_cuda_capture.argtypes = [ctypes.c_size_t, ctypes.c_uint64]
check(lib.vram_torch_graph_pool_stream(0, 0, 5, 1, 0x1000) == 0, "name the first capture by its stream")
fake_lib.fake_cuda_capture(0x3000, 900)
check(lib.vram_torch_graph_pool(0, 0, 6, 1) == 0, "a second capture at once, into pool (0, 6)")
check(lib.vram_torch_graph_pool_stream(0, 0, 6, 1, 0x2000) != 0 and b"not capturing" in lib.vram_torch_last_error(),
      "naming it by a stream that does not capture fails: %s" % lib.vram_torch_last_error())
check(lib.vram_torch_graph_pool_stream(0, 0, 6, 1, 0x3000) == 0, "name it by its stream")
check(lib.vram_torch_graph_pool_stream(7, 0, 6, 1, 0x3000) != 0 and b"unknown operation" in lib.vram_torch_last_error(),
      "an unknown stream operation is refused: %s" % lib.vram_torch_last_error())
h = lib.vram_torch_alloc(4 << 20, 1, 0x3000)
lib.vram_torch_free(h, 4 << 20, 1, 0x3000)
g2 = lib.vram_torch_alloc(8 << 20, 1, 0x1000)
check(g2 == g, "the first capture takes its own freed block again, not the second's")
lib.vram_torch_free(g2, 8 << 20, 1, 0x1000)
check(lib.vram_torch_graph_pool(1, 0, 5, 1) == 0, "end the first")
fake_lib.fake_cuda_capture(0x3000, 0)
check(lib.vram_torch_graph_pool(1, 0, 6, 1) == 0, "end the second")
lib.vram_torch_empty_cache(-1)
check(reserved(1) >= 12 << 20 and reserved(0) == 0, "the graphs' memory stays on cuda:1 only: %d, %d" % (reserved(1), reserved(0)))
check(reserved(1) < 18 << 20, "another stream's block, freed during the captures, is not a graph's: %d" % reserved(1))
check(lib.vram_torch_graph_pool(2, 0, 6, 1) == 0, "release the second pool")
check(lib.vram_torch_graph_pool(2, 0, 5, 1) == 0, "release the pool")
lib.vram_torch_empty_cache(-1)
check(reserved(1) == 0, "released, then emptied: %d" % reserved(1))
check(lib.vram_torch_graph_pool(2, 0, 5, 1) != 0, "a second release of the pool fails")
# Pools (1, 0) and (0, 2^32) are distinct (a packing of the pair into one 64-bit id made them one
# pool): releasing the first frees its 8 MiB and keeps the second's 16 MiB.
check(lib.vram_torch_graph_pool(0, 1, 0, 1) == 0, "begin pool (1, 0)")
lib.vram_torch_free(lib.vram_torch_alloc(8 << 20, 1, 0x1000), 8 << 20, 1, 0x1000)
check(lib.vram_torch_graph_pool(1, 1, 0, 1) == 0, "end pool (1, 0)")
check(lib.vram_torch_graph_pool(0, 0, 1 << 32, 1) == 0, "begin pool (0, 2^32)")
lib.vram_torch_free(lib.vram_torch_alloc(16 << 20, 1, 0x1000), 16 << 20, 1, 0x1000)
check(lib.vram_torch_graph_pool(1, 0, 1 << 32, 1) == 0, "end pool (0, 2^32)")
check(lib.vram_torch_graph_pool(2, 1, 0, 1) == 0, "release pool (1, 0)")
lib.vram_torch_empty_cache(-1)
check((16 << 20) <= reserved(1) < (24 << 20), "pool (0, 2^32) keeps only its own memory: %d" % reserved(1))
check(lib.vram_torch_graph_pool(2, 1, 0, 1) != 0 and b"PyTorch pool (1, 0)" in lib.vram_torch_last_error(),
      "a second release of (1, 0) fails, naming PyTorch's pool: %s" % lib.vram_torch_last_error())
check(lib.vram_torch_graph_pool(2, 0, 1 << 32, 1) == 0, "release pool (0, 2^32)")
lib.vram_torch_empty_cache(-1)
check(reserved(1) == 0, "both released, then emptied: %d" % reserved(1))
check(lib.vram_torch_graph_pool(0, 0, 0, 1) != 0 and b"pool id 0" in lib.vram_torch_last_error(), "pool (0, 0) refused")
check(lib.vram_torch_graph_pool(7, 0, 5, 1) != 0 and b"unknown operation" in lib.vram_torch_last_error(), "a bad operation fails")
# checkpoints of a pool no graph uses: refused with the allocator's message
ull = ctypes.c_ulonglong
lib.vram_torch_graph_pool_blocks.argtypes = [ull, ull, c_int, ctypes.POINTER(ull), ctypes.c_size_t,
                                             ctypes.POINTER(ctypes.c_size_t)]
lib.vram_torch_graph_pool_recreate.argtypes = [ull, ull, c_int, ctypes.POINTER(ull), ctypes.c_size_t,
                                               ctypes.POINTER(ctypes.c_ubyte)]
count, out = ctypes.c_size_t(7), (ull * 5)()
check(lib.vram_torch_graph_pool_blocks(0, 99, 1, out, 1, ctypes.byref(count)) != 0 and count.value == 0 and
      b"no graph uses that pool" in lib.vram_torch_last_error(), "the blocks of an unknown pool: refused")
block = (ull * 5)(1 << 30, 512, 512, 0, 0)
check(lib.vram_torch_graph_pool_recreate(0, 99, 1, block, 1, None) != 0 and
      b"no graph uses that pool" in lib.vram_torch_last_error(), "a checkpoint of an unknown pool: refused")
fake_lib.fake_cuda_set_capturing(0)
# The statistics of a device not used yet come from a throwaway allocator without the history ring
# the configuration asks for (16M events, ~800 MB of host memory a question): under a 300 MB
# address-space budget above what the process holds, they are still answered.
import subprocess  # noqa: E402
probe = ("import ctypes, resource, sys\n"
         "lib = ctypes.CDLL(sys.argv[1])\n"
         "lib.vram_torch_stats_text.restype, lib.vram_torch_stats_text.argtypes = ctypes.c_void_p, [ctypes.c_int]\n"
         "used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
         "resource.setrlimit(resource.RLIMIT_AS, (used + (300 << 20), resource.RLIM_INFINITY))\n"
         "sys.exit(0 if lib.vram_torch_stats_text(1) else 3)\n")
run = subprocess.run([sys.executable, "-c", probe, lib_path], capture_output=True, text=True,
                     env=dict(os.environ, VRAM_ALLOC_CONF="history:16777216"))
check(run.returncode == 0, "idle statistics with history:16777216 configured, in 300 MB: status %d %s"
      % (run.returncode, run.stderr[-300:]))
sys.exit(done("test_torch_plugin_cpu"))

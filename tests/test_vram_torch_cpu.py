"""test_vram_torch_cpu.py — the vram_torch package end to end without PyTorch or a GPU: a
stand-in `torch` (the few names vram_torch uses) over the real libvram_torch.so and the fake
driver (tests/fakes/fake_cuda.c). enable() swaps the allocator and routes torch.cuda's
functions; then, with allocations made the way PyTorch's pluggable allocator makes them
(vram_torch_alloc/free), torch.cuda.memory_stats() before the first allocation (every key, at
zero), memory_allocated / max_memory_allocated / memory_reserved, memory_summary,
_record_memory_history + _snapshot's events, empty_cache, Tensor.record_stream, a second device,
CUDA graph captures (torch.cuda.CUDAGraph: private pools, release at reset and at collection, one
capture at a time), CUDA graph trees' pool calls (routing, the live check, checkpoints taken and
restored, case by case and in 3,000 random operations against a model), `python -m vram_torch run`, and bad arguments. The real PyTorch runs in tests/gpu/test_torch_plugin.py.
Usage: test_vram_torch_cpu.py LIBVRAM_TORCH FAKE_LIBCUDA
"""
import ctypes
import os
import sys
import threading
import types
import warnings

if os.environ.get("VRAM_TEST_SANITIZED") and not os.environ.get("VRAM_TEST_PRELOADED"):
    print("SKIP: the sanitizer build's library cannot be loaded into an uninstrumented python "
          "without the sanitizers' runtimes preloaded (tests/extra.cmake)")
    sys.exit(77)
lib_path, fake = sys.argv[1], sys.argv[2]
os.environ.update({"VRAM_TORCH_LIBRARY": lib_path, "VRAM_LIBCUDA": fake, "FAKE_CUDA_MEMORY": str(1 << 30),
                   "FAKE_CUDA_DEVICES": "2", "VRAM_ALLOC_CONF": ""})
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)
from pycheck import check, done  # noqa: E402

# --- the stand-in torch ---------------------------------------------------------------------
fake_driver = ctypes.CDLL(fake)  # the library the plug-in loads (same path, same state)
fake_driver.fake_cuda_capture.argtypes = [ctypes.c_size_t, ctypes.c_uint64]
CAPTURE_STREAM = 0x1000  # the stream the stand-in's captures record, unless a test changes it
current_stream = [CAPTURE_STREAM]
swapped = []
torch = types.ModuleType("torch")
torch.__file__ = os.path.join(HERE, "no_torch_here", "__init__.py")
cuda = types.ModuleType("torch.cuda")
memory = types.ModuleType("torch.cuda.memory")


def raises(name):
    def fn(*a, **k):
        raise RuntimeError("CUDAPluggableAllocator does not yet support %s" % name)
    return fn


for n in ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
          "memory_summary", "reset_peak_memory_stats", "empty_cache", "_snapshot", "_record_memory_history",
          "get_per_process_memory_fraction"):
    setattr(memory, n, raises(n))
    if not n.startswith("_"):
        setattr(cuda, n, getattr(memory, n))
memory.CUDAPluggableAllocator = lambda path, alloc, free: ("pluggable", path, alloc, free)
memory.change_current_allocator = swapped.append
cuda.memory = memory
cuda.is_initialized = lambda: False
cuda.current_device = lambda: 0
cuda.current_stream = lambda device=None: types.SimpleNamespace(cuda_stream=current_stream[0])
cuda.device_count = lambda: 2
torch.cuda = cuda
torch.__version__, torch.version = "2.11.0", types.SimpleNamespace(cuda="12.8")
torch._C = types.ModuleType("torch._C")  # the pool calls of CUDA graph trees, as a pluggable allocator has them
for n in ("_cuda_beginAllocateCurrentStreamToPool", "_cuda_endAllocateCurrentStreamToPool", "_cuda_releasePool"):
    setattr(torch._C, n, lambda *a, **k: None)  # no-ops under a pluggable allocator
for n in ("_cuda_checkPoolLiveAllocations", "_cuda_getCheckpointState", "_cuda_setCheckpointPoolState"):
    setattr(torch._C, n, raises(n.replace("_cuda_", "")))
raw_deleted = []
torch._C._cuda_cudaCachingAllocator_raw_delete = raw_deleted.append  # PyTorch's, through its allocator
owning = {}  # StorageImpl address -> block of a storage that owns its memory (PyTorch's deleter)
torch._C._has_Standard_Deleter = lambda impl: impl in owning


def free_and_remove_deleter(impl):  # PyTorch's: frees the block through the allocator, keeps the storage
    if impl not in owning:
        raise RuntimeError("Unexpected deleter function on storage, could not swap function")
    lib.vram_torch_free(owning.pop(impl), 0, 0, None)


torch._C._free_And_Remove_DeleterFn = free_and_remove_deleter


class Storage:
    """A storage of a tensor the CUDA graph trees rebuilt after a replay (it owns nothing),
    reachable by its StorageImpl address as the trees pass it; alive until a test says not."""
    table = {}

    def __init__(self, ptr):
        self.ptr, self.alive, self.impl = ptr, True, 0x5000 + 16 * len(Storage.table)
        Storage.table[self.impl] = self

    def data_ptr(self):
        return self.ptr


class StorageWeakRef:
    def __init__(self, storage):
        self.storage = storage

    def expired(self):
        return not self.storage.alive


torch.UntypedStorage = types.SimpleNamespace(
    _new_with_weak_ptr=lambda impl: Storage.table[impl] if Storage.table[impl].alive else None)
reductions = types.ModuleType("torch.multiprocessing.reductions")
reductions.StorageWeakRef = StorageWeakRef
sys.modules["torch.multiprocessing"] = torch.multiprocessing = types.ModuleType("torch.multiprocessing")
sys.modules["torch.multiprocessing.reductions"] = reductions
spawn_module = types.ModuleType("torch.multiprocessing.spawn")  # what torch.multiprocessing.spawn() calls
started = []  # the functions its workers would run
spawn_module.start_processes = lambda fn, args=(), nprocs=1, *rest, **kw: started.append((fn, args, nprocs)) or "ctx"
torch.multiprocessing.start_processes = spawn_module.start_processes
sys.modules["torch.multiprocessing.spawn"] = spawn_module


class Device:
    def __init__(self, spec):
        if str(spec).split(":")[0] not in ("cuda", "cpu"):
            raise RuntimeError("Expected one of cpu, cuda device type at start of device string: %s" % spec)
        self.type = str(spec).split(":")[0]
        self.index = int(str(spec).split(":")[1]) if ":" in str(spec) else None


class Tensor:
    def __init__(self, ptr):
        self.ptr, self.is_cuda, self.device = ptr, True, Device("cuda:0")

    def untyped_storage(self):
        return types.SimpleNamespace(data_ptr=lambda: self.ptr)

    def record_stream(self, stream):
        raise AssertionError("PyTorch's own record_stream must not be called for a CUDA tensor")


graph_calls = []
capture_ids = [0]


class CUDAGraph:
    """PyTorch's torch.cuda.CUDAGraph, as far as vram_torch's wrapping goes."""
    def __init__(self):
        self._pool = None

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if capture_error_mode == "refuse":  # PyTorch failing to start the capture
            raise RuntimeError("capture refused by the stand-in")
        graph_calls.append(("begin", pool))
        self._pool, self._stream = pool, current_stream[0]
        capture_ids[0] += 1  # cudaStreamBeginCapture on the current stream: a new capture id
        if capture_error_mode != "unseen":  # "unseen": a capture the driver does not report
            fake_driver.fake_cuda_capture(self._stream, capture_ids[0])

    def capture_end(self):
        graph_calls.append(("end",))
        fake_driver.fake_cuda_capture(self._stream, 0)

    def reset(self):
        graph_calls.append(("reset",))

    def pool(self):
        return self._pool


handles = []


def graph_pool_handle():
    handles.append((0, len(handles) + 1))
    return handles[-1]


cuda.CUDAGraph, cuda.graph_pool_handle = CUDAGraph, graph_pool_handle
torch.device, torch.Tensor = Device, Tensor
sys.modules.update({"torch": torch, "torch.cuda": cuda, "torch.cuda.memory": memory})

# --- vram_torch over it -----------------------------------------------------------------------
import vram_torch  # noqa: E402

# A library that does not load, or is not libvram_torch.so (the fake driver: none of its
# functions), is one RuntimeError naming it, not ctypes' OSError or AttributeError.
for bad, want in ((__file__, "cannot load"), (fake, "has no vram_torch_")):
    os.environ["VRAM_TORCH_LIBRARY"] = bad
    try:
        vram_torch.memory_stats(0)
        check(False, "library %s must be refused" % bad)
    except RuntimeError as e:
        check(want in str(e) and bad in str(e) and vram_torch._lib is None, "library %s: %s" % (bad, e))
os.environ["VRAM_TORCH_LIBRARY"] = lib_path
# The package and the library carry one version (CMakeLists.txt's); a library of another is refused
# by name (a pip-installed package pointed at an old build's library, say).
with open(os.path.join(os.path.dirname(HERE), "CMakeLists.txt")) as f:
    check('project(vram VERSION %s ' % vram_torch.__version__ in f.read(),
          "vram_torch.__version__ %s is CMakeLists.txt's" % vram_torch.__version__)
own = vram_torch.__version__
vram_torch.__version__ = "0.0.9"
try:
    vram_torch.memory_stats(0)
    check(False, "a library of another version must be refused")
except RuntimeError as e:
    check(("vram_torch 0.0.9: %s is libvram_torch.so %s" % (lib_path, own)) in str(e) and vram_torch._lib is None,
          "another version's library: %s" % e)
vram_torch.__version__ = own

# Before enable(): what would act on vram's allocator says it is not PyTorch's yet (instead of
# starting an allocator PyTorch never uses); the summary says so.
for call in (lambda: vram_torch.set_per_process_memory_fraction(0.5), lambda: vram_torch.record_memory_history()):
    try:
        call()
        check(False, "a setter before enable() must fail")
    except RuntimeError as e:
        check("enable() first" in str(e), "before enable(): %s" % e)
check("not enabled" in vram_torch.memory_summary(), "summary before enable(): %r" % vram_torch.memory_summary())
# ... and the statistics of the current device do not start CUDA to find it (PyTorch's
# torch.cuda.current_device() does, and enable() then refuses): before CUDA starts it is 0.
cuda.current_device = lambda: asked_current.append(1) or 0
asked_current = []
check(vram_torch.memory_stats() == {} and vram_torch.max_memory_allocated() == 0 and vram_torch.memory_reserved("cuda") == 0
      and vram_torch.snapshot()["segments"] == [] and vram_torch.reset_peak_memory_stats() is None
      and "not enabled" in vram_torch.memory_summary() and not asked_current,
      "statistics before enable() leave CUDA alone (torch.cuda.current_device() asked %d times)" % len(asked_current))
cuda.current_device = lambda: 0
# A bad VRAM_ALLOC_CONF stops enable() before PyTorch's allocator is swapped.
os.environ["VRAM_ALLOC_CONF"] = "chunk_headroom:lots"
try:
    vram_torch.enable()
    check(False, "enable() with a bad VRAM_ALLOC_CONF must fail")
except ValueError as e:
    check("chunk_headroom" in str(e) and not swapped and not vram_torch.is_enabled(), "bad config refused: %s" % e)
del os.environ["VRAM_ALLOC_CONF"]
# A PyTorch built without CUDA (torch.version.cuda None) is said so, before anything is swapped
# (its torch._C has no _cuda_customAllocator for CUDAPluggableAllocator).
torch.version.cuda = None
try:
    vram_torch.enable()
    check(False, "enable() on a PyTorch without CUDA must fail")
except RuntimeError as e:
    check("without CUDA" in str(e) and not swapped and not vram_torch.is_enabled(), "no CUDA in PyTorch: %s" % e)
torch.version.cuda = "12.8"

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    vram_torch.enable(route_torch=False)
try:
    torch.cuda.memory_stats()
    check(False, "enable(route_torch=False) leaves torch.cuda's functions PyTorch's")
except RuntimeError:
    pass
check(vram_torch.is_enabled() and swapped and swapped[0][0] == "pluggable" and swapped[0][2] == "vram_torch_alloc",
      "enable() hands PyTorch vram's alloc/free: %s" % swapped)
check(any("OutOfMemoryError" in str(w.message) for w in caught), "no PyTorch libraries: enable() warns how OOM will raise")
check(any("cudnn.benchmark" in str(w.message) and "not found" in str(w.message) for w in caught),
      "and that PyTorch's allocator object could not be given cacheInfo and recordStream: %s"
      % [str(w.message)[:120] for w in caught])
vram_torch.enable()
check(len(swapped) == 1, "a second enable() swaps nothing")


def spawned_worker(rank, value):  # a DDP script's worker function, started by torch.multiprocessing.spawn
    return ("worked", rank, value, vram_torch.is_enabled())


# Workers started with torch.multiprocessing.spawn / start_processes enable vram before the script's
# function runs (they are fresh interpreters: nothing else would); the wrapper pickles by reference.
import pickle  # noqa: E402
check(spawn_module.start_processes(spawned_worker, (7,), 2) == "ctx"
      and torch.multiprocessing.start_processes is spawn_module.start_processes, "start_processes wrapped, both bindings")
fn, args, nprocs = started[-1]
again = pickle.loads(pickle.dumps(fn))
check(type(fn).__name__ == "EnableThen" and again.fn is spawned_worker and (args, nprocs) == ((7,), 2),
      "the worker's function comes wrapped, picklable: %r" % (fn,))
enabled_in_worker = []
real_enable = vram_torch.enable
vram_torch.enable = lambda route_torch=True: enabled_in_worker.append(route_torch)
check(again(0, 7) == ("worked", 0, 7, True) and enabled_in_worker == [True],
      "in the worker: vram enabled first (routed, as this process is now), then the function: %s" % enabled_in_worker)


def cannot_enable(route_torch=True):
    raise RuntimeError("vram_torch.enable() must run before CUDA is first used")


vram_torch.enable = cannot_enable
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    check(again(1, 8)[:3] == ("worked", 1, 8) and any("PyTorch's allocator" in str(w.message) for w in caught),
          "a worker that cannot take vram says so and runs on PyTorch's allocator")
vram_torch.enable = real_enable
check("allocated_bytes.all.current" in torch.cuda.memory_stats(), "but routes what the first left PyTorch's")

stats = torch.cuda.memory_stats()
check(stats.get("allocated_bytes.all.peak") == 0 and stats.get("reserved_bytes.all.current") == 0 and len(stats) > 50,
      "before the first allocation every key is there, at zero (%d keys)" % len(stats))
check(torch.cuda.max_memory_allocated() == 0, "max_memory_allocated before any allocation")

lib = ctypes.CDLL(lib_path)
lib.vram_torch_alloc.restype, lib.vram_torch_alloc.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
lib.vram_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
torch.cuda.memory._record_memory_history(max_entries=100)
p = lib.vram_torch_alloc(10 << 20, 0, 0x1000)
check(p and torch.cuda.memory_allocated() == 10 << 20 and torch.cuda.memory_allocated("cuda:0") == 10 << 20,
      "torch.cuda.memory_allocated counts vram's block: %d" % torch.cuda.memory_allocated())
check(torch.cuda.max_memory_allocated() == 10 << 20 and torch.cuda.memory_reserved() >= 10 << 20, "peak and reserved")
check("Allocated memory" in torch.cuda.memory_summary(), "torch.cuda.memory_summary is vram's table")
t = Tensor(p)
t.record_stream(types.SimpleNamespace(cuda_stream=0x2000))  # routed: kept until an event on 0x2000 completes
lib.vram_torch_free(p, 10 << 20, 0, 0x1000)
s = vram_torch.memory_stats()
check(s["allocated_bytes.all.current"] == 0 and s["active_bytes.all.current"] == 10 << 20,
      "Tensor.record_stream: freed, still active until the other stream's event")
acts = [e["action"] for e in torch.cuda.memory._snapshot()["device_traces"][0]]
check("alloc" in acts and "free_requested" in acts[acts.index("alloc"):], "_record_memory_history + _snapshot: vram's events %s"
      % acts)
check(vram_torch.history_count() == len(acts), "history_count %d counts the events kept (%d)" % (vram_torch.history_count(), len(acts)))
for _ in range(60):  # past the ring's 100 entries: the count goes on, the ring keeps the last 100
    lib.vram_torch_free(lib.vram_torch_alloc(1 << 20, 0, 0x1000), 1 << 20, 0, 0x1000)
kept = torch.cuda.memory._snapshot()["device_traces"][0]
check(len(kept) == 100 and vram_torch.history_count() > 100 and kept[-1]["action"] in ("free_requested", "free_completed"),
      "history_count %d past a ring of %d" % (vram_torch.history_count(), len(kept)))
torch.cuda.memory._record_memory_history(enabled=None)
check(vram_torch.history_count() == 0, "history_count is 0 with the history off")
check(torch.cuda.memory._snapshot()["device_traces"] == [[], []], "_record_memory_history(enabled=None) stops it")

# Python stacks (_record_memory_history's context and stacks): the plug-in reads the frames of the
# thread that allocates (here the ctypes calls below, as PyTorch's C++ would call it).
def allocate_here(n):
    return lib.vram_torch_alloc(n, 0, 0x1000)  # the line the frames must name


def free_here(ptr, n):
    lib.vram_torch_free(ptr, n, 0, 0x1000)


ALLOC_LINE = allocate_here.__code__.co_firstlineno + 1
FREE_LINE = free_here.__code__.co_firstlineno + 1


def frames_of(snap, addr):
    """The frames of the live block at addr, and of its last alloc and free_requested events."""
    block = [b for seg in snap["segments"] for b in seg["blocks"] if b["address"] == addr][0]
    events = snap["device_traces"][0]
    last = lambda action: ([e for e in events if e["action"] == action and e["addr"] == addr] or [{}])[-1]
    return block.get("frames"), last("alloc").get("frames"), last("free_requested").get("frames")


def names(frames):
    return [(f["name"], f["line"]) for f in frames or []]


def stack_case(context, stacks):
    torch.cuda.memory._record_memory_history(max_entries=1000, context=context, stacks=stacks)
    live, gone = allocate_here(6 << 20), allocate_here(7 << 20)
    free_here(gone, 7 << 20)
    snap = torch.cuda.memory._snapshot()
    block, alloc, _ = frames_of(snap, live)
    free_frames = frames_of(snap, gone)[2]
    free_here(live, 6 << 20)
    torch.cuda.memory._record_memory_history(enabled=None)
    check(all("context" not in e for e in snap["device_traces"][0]), "%s/%s: no context key left" % (context, stacks))
    return block, alloc, free_frames


here = os.path.abspath(__file__)
for context, stacks in (("all", "all"), ("all", "python"), ("alloc", "python"), ("state", "all"), (None, "all"),
                        ("all", None)):
    block, alloc, free_frames = stack_case(context, stacks)
    want_block = context is not None and stacks is not None
    want_alloc = want_block and context in ("alloc", "all")
    want_free = want_block and context == "all"
    for what, frames, want, line, fn in (("block", block, want_block, ALLOC_LINE, "allocate_here"),
                                         ("alloc event", alloc, want_alloc, ALLOC_LINE, "allocate_here"),
                                         ("free event", free_frames, want_free, FREE_LINE, "free_here")):
        if not want:
            check(frames == [], "%s/%s: the %s has no frames: %s" % (context, stacks, what, names(frames)))
            continue
        check(bool(frames) and frames[0]["name"] == fn and frames[0]["line"] == line and
              os.path.abspath(frames[0]["filename"]) == here and frames[1]["name"] == "stack_case" and
              frames[-1]["name"] == "<module>",
              "%s/%s: the %s's frames, innermost first: %s" % (context, stacks, what, names(frames)))

# Equal stacks are one; another thread's allocation has that thread's stack.
count = lambda: lib.vram_torch_stacks_count(None)
lib.vram_torch_stacks_count.restype = ctypes.c_longlong
torch.cuda.memory._record_memory_history(max_entries=1000)
before = count()
for _ in range(3):
    free_here(allocate_here(1 << 20), 1 << 20)
check(count() - before <= 2, "a loop's allocations share their stacks: %d new" % (count() - before))
got = []


def thread_allocates():
    got.append(allocate_here(3 << 20))


worker = threading.Thread(target=thread_allocates)
worker.start()
worker.join()
block = frames_of(torch.cuda.memory._snapshot(), got[0])[0]
check(names(block)[:2] == [("allocate_here", ALLOC_LINE), ("thread_allocates", thread_allocates.__code__.co_firstlineno + 1)]
      and block[-1]["name"] in ("_bootstrap", "_bootstrap_inner"), "a thread's stack: %s" % names(block))
free_here(got[0], 3 << 20)
torch.cuda.memory._record_memory_history(enabled=None)
p = allocate_here(2 << 20)
torch.cuda.memory._record_memory_history(max_entries=100)
check(frames_of(torch.cuda.memory._snapshot(), p)[0] == [], "a block allocated while stacks were off has no frames")
free_here(p, 2 << 20)
torch.cuda.memory._record_memory_history(enabled=None)
# Out-of-memory observers (torch._C._cuda_attach_out_of_memory_observer under vram): the plug-in
# calls one trampoline (tests/torch_oom_observer.cpp checks that call from C++), which calls every
# observer in turn; one that raises is reported and the others still run.
seen_oom = []
vram_torch.attach_out_of_memory_observer(lambda *args: seen_oom.append(("first",) + args))
vram_torch.attach_out_of_memory_observer(lambda *args: 1 / 0)
vram_torch.attach_out_of_memory_observer(lambda *args: seen_oom.append(("third",) + args))
import contextlib  # noqa: E402
import io  # noqa: E402
err = io.StringIO()
with contextlib.redirect_stderr(err):
    vram_torch._OOM_OBSERVER(vram_torch._observe_oom)(0, 400 << 20, 256 << 20, 900 << 20)  # as the plug-in calls it
check(seen_oom == [("first", 0, 400 << 20, 256 << 20, 900 << 20), ("third", 0, 400 << 20, 256 << 20, 900 << 20)],
      "every observer called with (device, alloc, device_total, device_free): %s" % seen_oom)
check("ZeroDivisionError" in err.getvalue() and "observer raised" in err.getvalue(), "the raising one reported: %r"
      % err.getvalue()[-200:])
check(vram_torch._oom_trampoline is not None, "the plug-in has the trampoline")
try:
    vram_torch.attach_out_of_memory_observer("not callable")
    check(False, "a non-callable observer must fail")
except TypeError as e:
    check("callable" in str(e), "non-callable observer: %s" % e)
del vram_torch._oom_observers[:]
for bad in (dict(context="everything"), dict(stacks="cpp")):
    try:
        vram_torch.record_memory_history(**bad)
        check(False, "record_memory_history(%s) must fail" % bad)
    except ValueError as e:
        check(list(bad)[0] in str(e), "bad %s: %s" % (bad, e))
try:
    vram_torch.record_memory_history(max_entries=-1)
    check(False, "a negative max_entries must fail")
except ValueError as e:
    check("max_entries" in str(e), "says which argument: %s" % e)
torch.cuda.reset_peak_memory_stats()
check(torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated(), "torch.cuda.reset_peak_memory_stats")
q = lib.vram_torch_alloc(64 << 20, 0, 0x1000)
lib.vram_torch_free(q, 64 << 20, 0, 0x1000)
before = torch.cuda.memory_reserved()
torch.cuda.empty_cache()
check(before >= 64 << 20 and torch.cuda.memory_reserved() < before, "torch.cuda.empty_cache returns vram's cache: %d -> %d"
      % (before, torch.cuda.memory_reserved()))
# a second device: its own numbers, by index or by name; empty_cache() empties every device. The
# history, as PyTorch's, is process-wide (cuda:1 starts after it was asked for) and _snapshot()
# covers every device, each device's events at its index, as PyTorch's does
check(not lib.vram_torch_device_active(1), "cuda:1 not started yet")
torch.cuda.memory._record_memory_history(max_entries=50, device=0)  # PyTorch's ignores `device`: every device
check(not lib.vram_torch_device_active(1), "asking for the history starts nothing on cuda:1")
idle = torch.cuda.memory_stats(1)  # every key at zero, as PyTorch's, and nothing started on that GPU
check(len(idle) > 50 and not any(v for k, v in idle.items() if k != "max_split_size") and idle["max_split_size"] == -1
      and not lib.vram_torch_device_active(1) and torch.cuda.max_memory_allocated("cuda:1") == 0,
      "memory_stats of a device not used yet: %d keys at zero, cuda:1 still not started" % len(idle))
check(set(idle) == set(torch.cuda.memory_stats(0)), "the same keys as a device in use")
check(torch.cuda.get_per_process_memory_fraction(1) == 1.0 and not lib.vram_torch_device_active(1),
      "the memory fraction of a device not used yet, without starting it")
idle_summary = torch.cuda.memory_summary(1)
check("device ID 1" in idle_summary and "Allocated memory" in idle_summary and not lib.vram_torch_device_active(1),
      "memory_summary of a device not used yet: the table, at zero, without starting it: %s" % idle_summary[:300])
q0 = lib.vram_torch_alloc(2 << 20, 0, 0x1000)
r = lib.vram_torch_alloc(32 << 20, 1, 0x1000)
check(torch.cuda.memory_allocated(1) == 32 << 20 and torch.cuda.memory_allocated("cuda:1") == 32 << 20
      and torch.cuda.memory_allocated(0) == 2 << 20, "cuda:1 counts its block, cuda:0 its own")
snap = torch.cuda.memory._snapshot(0)  # PyTorch's ignores `device` too: every device
live = {(s["device"], b["address"]) for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"}
check({(0, q0), (1, r)} <= live, "_snapshot() has both devices' blocks: %s" % sorted(live))
check(len(snap["device_traces"]) == 2 and [e["addr"] for e in snap["device_traces"][1] if e["action"] == "alloc"] == [r]
      and q0 in [e["addr"] for e in snap["device_traces"][0] if e["action"] == "alloc"],
      "device_traces by device: cuda:1's alloc at index 1, cuda:0's at 0")
check(r in [b["address"] for s in vram_torch.snapshot()["segments"] for b in s["blocks"]],
      "vram_torch.snapshot() lists every device's segments")
one = vram_torch.snapshot(1)
check({s["device"] for s in one["segments"]} == {1} and one["device_traces"][0] == [] and one["device_traces"][1],
      "snapshot(1): cuda:1's segments alone, its events at index 1")
torch.cuda.memory._record_memory_history(enabled=None)
check(torch.cuda.memory._snapshot()["device_traces"] == [[], []], "the history stops on both devices")
lib.vram_torch_free(q0, 2 << 20, 0, 0x1000)
lib.vram_torch_free(r, 32 << 20, 1, 0x1000)
torch.cuda.empty_cache()
check(torch.cuda.memory_reserved(1) == 0, "torch.cuda.empty_cache() empties cuda:1 too: %d" % torch.cuda.memory_reserved(1))
# CUDA graphs: what a capture allocated stays the graph's until the graph is reset or collected
import gc  # noqa: E402
S = 0x1000
g = torch.cuda.CUDAGraph()
g.capture_begin()
check(graph_calls == [("begin", (0, 1))], "capture_begin passes PyTorch a fresh pool handle: %s" % graph_calls)
tmp = lib.vram_torch_alloc(4 << 20, 0, S)      # the captured work's temporary
lib.vram_torch_free(tmp, 4 << 20, 0, S)
out = lib.vram_torch_alloc(1 << 20, 0, S)      # its output
g.capture_end()
lib.vram_torch_free(out, 1 << 20, 0, S)         # the program drops the output tensor
later = [lib.vram_torch_alloc(n, 0, S) for n in [4 << 20, 1 << 20] * 16]
check(tmp not in later and out not in later, "memory of a live graph serves nothing else")
for n, ptr in zip([4 << 20, 1 << 20] * 16, later):
    lib.vram_torch_free(ptr, n, 0, S)
torch.cuda.empty_cache()
check(torch.cuda.memory_reserved() >= 5 << 20, "empty_cache keeps the graph's memory: %d" % torch.cuda.memory_reserved())
g.reset()
torch.cuda.empty_cache()
check(torch.cuda.memory_reserved() == 0, "reset() releases the graph's pool: %d" % torch.cuda.memory_reserved())
g2 = torch.cuda.CUDAGraph()
g2.capture_begin(pool=(0, 99))
kept = lib.vram_torch_alloc(2 << 20, 0, S)
g2.capture_end()
lib.vram_torch_free(kept, 2 << 20, 0, S)
g3 = torch.cuda.CUDAGraph()
g3.capture_begin()
# captures at once, each on its own stream (other threads'): each takes its own stream's memory
current_stream[0] = 0x4000
g5 = torch.cuda.CUDAGraph()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    g5.capture_begin()
check(not caught, "the driver names each capture: no warning (%s)" % [str(w.message) for w in caught])
b5 = lib.vram_torch_alloc(3 << 20, 0, 0x4000)
lib.vram_torch_free(b5, 3 << 20, 0, 0x4000)
b3 = lib.vram_torch_alloc(3 << 20, 0, S)
lib.vram_torch_free(b3, 3 << 20, 0, S)
others = []
for k in range(6):  # eight captures under way in all
    current_stream[0] = 0x5000 + 0x100 * k
    others.append(torch.cuda.CUDAGraph())
    others[-1].capture_begin()
current_stream[0] = 0x6000
try:
    torch.cuda.CUDAGraph().capture_begin()
    check(False, "a ninth capture at once must be refused")
except RuntimeError as e:
    check("captures are under way" in str(e), "at most eight captures at once, said before PyTorch captures: %s" % e)
check(graph_calls.count(("begin", (0, 99))) == 1 and len([c for c in graph_calls if c[0] == "begin"]) == 10,
      "the refused capture never reached PyTorch: %s" % graph_calls)
for other in others:
    other.capture_end()
    other.reset()
g5.capture_end()
current_stream[0] = CAPTURE_STREAM
g3.capture_end()
# each capture's block is its own pool's: once the graph begun last is released, ordinary
# allocations may take its block but never the other graph's
g5.reset()
plain = [(lib.vram_torch_alloc(3 << 20, 0, s), s) for s in (S, 0x4000) for _ in range(8)]  # on both streams
got = [p for p, _ in plain]
check(b3 not in got and b5 in got, "after one of two graphs captured at once is released, its block serves "
      "the program again and the other graph's does not: %s" % [b in got for b in (b3, b5)])
for p, s in plain:
    lib.vram_torch_free(p, 3 << 20, 0, s)
try:
    torch.cuda.CUDAGraph().capture_begin(pool=(0, 77), capture_error_mode="refuse")
    check(False, "PyTorch's refusal must reach the caller")
except RuntimeError as e:
    check("refused by the stand-in" in str(e), "PyTorch's own error comes through: %s" % e)
g4 = torch.cuda.CUDAGraph()
g4.capture_begin(pool=(0, 77))  # vram's pool was ended and released when PyTorch refused
g4.capture_end()
g4.reset()
g6 = torch.cuda.CUDAGraph()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    g6.capture_begin(capture_error_mode="unseen")
check(any("cannot be told apart" in str(w.message) and "not capturing" in str(w.message) for w in caught),
      "a capture vram cannot name is a warning, not an error: %s" % [str(w.message) for w in caught])
g6.capture_end()
g6.reset()
del g2, g3, g5
gc.collect()
torch.cuda.empty_cache()
check(torch.cuda.memory_reserved() == 0, "a collected graph releases its pool: %d" % torch.cuda.memory_reserved())
# torch.compile's CUDA graph trees: a warm-up run with the current stream's allocations routed into
# the tree's pool (outside any capture), its live blocks checked exactly, a checkpoint taken; a
# restore, which vram cannot do, refused with a message that says what to do instead
C, tree_pool, W = torch._C, (0, 555), 0x7000
tree_graph = torch.cuda.CUDAGraph()  # the tree's manager keeps its pool alive with an empty capture
tree_graph.capture_begin(pool=tree_pool)
tree_graph.capture_end()
current_stream[0] = W
C._cuda_beginAllocateCurrentStreamToPool(0, tree_pool)
w_out = lib.vram_torch_alloc(6 << 20, 0, W)        # the warm-up's output: the pool's
w_tmp = lib.vram_torch_alloc(2 << 20, 0, W)        # its temporary: the pool's, freed
lib.vram_torch_free(w_tmp, 2 << 20, 0, W)
elsewhere = lib.vram_torch_alloc(1 << 20, 0, S)    # another stream meanwhile: ordinary
C._cuda_endAllocateCurrentStreamToPool(0)
C._cuda_releasePool(0, tree_pool)
current_stream[0] = CAPTURE_STREAM
check(C._cuda_checkPoolLiveAllocations(0, tree_pool, {w_out}), "the pool's live blocks are the warm-up's output")
check(not C._cuda_checkPoolLiveAllocations(0, tree_pool, set()) and
      not C._cuda_checkPoolLiveAllocations(0, tree_pool, {w_out, elsewhere}) and
      not C._cuda_checkPoolLiveAllocations(0, tree_pool, {elsewhere}), "fewer, more or other blocks: not equal")
after = [lib.vram_torch_alloc(2 << 20, 0, W) for _ in range(8)]
check(w_tmp not in after, "the warm-up's freed temporary stays in the tree's pool")
for ptr in after:
    lib.vram_torch_free(ptr, 2 << 20, 0, W)
lib.vram_torch_free(w_out, 6 << 20, 0, W)
lib.vram_torch_free(elsewhere, 1 << 20, 0, S)
check(C._cuda_checkPoolLiveAllocations(0, tree_pool, set()), "nothing live in the pool once its output is freed")
# checkpoints: the trees take one after a recording (its outputs live), the outputs die, replays
# rebuild them as storages that own nothing; the restore carves the blocks again, the live
# output's storage adopts its block (freed once it dies), the dead one's the trees free
current_stream[0] = W
C._cuda_beginAllocateCurrentStreamToPool(0, tree_pool)
o1 = lib.vram_torch_alloc(6 << 20, 0, W)
o2 = lib.vram_torch_alloc(3 << 20, 0, W)
C._cuda_endAllocateCurrentStreamToPool(0)
C._cuda_releasePool(0, tree_pool)
current_stream[0] = CAPTURE_STREAM
state = C._cuda_getCheckpointState(0, tree_pool)
check(sorted(b[0] for b in state.blocks) == sorted([o1, o2]), "a checkpoint lists the pool's live blocks: %r" % state)
in_use = torch.cuda.memory_allocated()
lib.vram_torch_free(o1, 6 << 20, 0, W)
lib.vram_torch_free(o2, 3 << 20, 0, W)
check(C._cuda_checkPoolLiveAllocations(0, tree_pool, set()), "the recording's outputs died")
replayed = Storage(o1)  # the replay's rebuilt output at o1 (owning nothing); o2's died
C._cuda_setCheckpointPoolState(0, state, [], [replayed.impl])
check(C._cuda_checkPoolLiveAllocations(0, tree_pool, {o1, o2}) and torch.cuda.memory_allocated() == in_use,
      "the restore recreates both blocks at their addresses: %d bytes allocated, %d at the checkpoint"
      % (torch.cuda.memory_allocated(), in_use))
check(C._has_Standard_Deleter(replayed.impl) and not C._has_Standard_Deleter(Storage(o2).impl),
      "the adopting storage counts as owning its block, another does not")
C._cuda_cudaCachingAllocator_raw_delete(o2)  # the trees free the dead output's block
check(C._cuda_checkPoolLiveAllocations(0, tree_pool, {o1}) and not raw_deleted,
      "raw_delete of a recreated block frees it in vram, not through PyTorch's allocator")
C._cuda_cudaCachingAllocator_raw_delete(12345)
check(raw_deleted == [12345], "raw_delete of another pointer goes to PyTorch's: %s" % raw_deleted)
replayed.alive = False  # the output dies: its block is freed at the next call
check(torch.cuda.memory_allocated() == in_use - (9 << 20), "a dead adopted block is freed when the statistics are read")
check(C._cuda_checkPoolLiveAllocations(0, tree_pool, set()), "nothing live in the pool after the adopted output died")
# a second restore; then an allocation the checkpoint lacks is refused, changing nothing
again = Storage(o2)
C._cuda_setCheckpointPoolState(0, state, [], [again.impl])
C._cuda_cudaCachingAllocator_raw_delete(o1)
C._free_And_Remove_DeleterFn(again.impl)  # the trees end a generation: the block goes now
check(C._cuda_checkPoolLiveAllocations(0, tree_pool, set()), "_free_And_Remove_DeleterFn frees an adopted block")
current_stream[0] = W
C._cuda_beginAllocateCurrentStreamToPool(0, tree_pool)
o3 = lib.vram_torch_alloc(1 << 20, 0, W)
C._cuda_endAllocateCurrentStreamToPool(0)
C._cuda_releasePool(0, tree_pool)
current_stream[0] = CAPTURE_STREAM
try:
    C._cuda_setCheckpointPoolState(0, state, [], [])
    check(False, "a restore over an allocation the checkpoint lacks must be refused")
except RuntimeError as e:
    check("not in the checkpoint" in str(e) and C._cuda_checkPoolLiveAllocations(0, tree_pool, {o3}),
          "refused, nothing changed: %s" % e)
# a stale storage that still owns its block (the trees pass such ones when they free them):
# given as stale, PyTorch's deleter frees it first and the restore goes on
stale = Storage(o3)
owning[stale.impl] = o3
C._cuda_setCheckpointPoolState(0, state, [stale.impl], [])
check(C._cuda_checkPoolLiveAllocations(0, tree_pool, {o1, o2}) and stale.impl not in owning,
      "a stale owning storage's block freed through PyTorch's deleter, the checkpoint's blocks recreated")
C._cuda_cudaCachingAllocator_raw_delete(o1)
C._cuda_cudaCachingAllocator_raw_delete(o2)
try:
    C._cuda_setCheckpointPoolState(0, object(), [], [])
    check(False, "a checkpoint vram did not take must be refused")
except RuntimeError as e:
    check("not a checkpoint vram took" in str(e), "a foreign checkpoint: %s" % e)
try:
    C._cuda_endAllocateCurrentStreamToPool(0)
    check(False, "an end without a begin must be refused")
except RuntimeError as e:
    check("none was begun" in str(e), "an end without a begin: %s" % e)


def random_restores(steps, seed):
    """Checkpoints taken and restored at random among routed allocations and frees, outputs that
    adopt recreated blocks and die, raw_deletes and _free_And_Remove_DeleterFn, against a model:
    after every step the pool's live blocks are exactly the model's (the trees' own live check,
    which sweeps first), a restore over a block its checkpoint lacks is refused and changes
    nothing, and at the end every block is freed once."""
    import random
    rng = random.Random(seed)
    owned = {}        # routed allocations the program frees itself (PyTorch's deleter): ptr -> size
    adopters = {}     # recreated blocks: ptr -> [Storage, ...] adopting it ([] until raw_delete)
    sizes = {}        # a recreated block's size
    saved = None      # (checkpoint, the live set it holds)
    bad, first_bad, refused, restored = 0, None, 0, 0
    for step in range(steps):
        before = bad
        op = rng.random()
        if op < 0.3 and sum(owned.values()) < (200 << 20):  # (the fake GPU has 1 GiB)
            current_stream[0] = W
            C._cuda_beginAllocateCurrentStreamToPool(0, tree_pool)
            size = rng.choice([512, 4096, 768 << 10, 2 << 20, 5 << 20, (9 << 20) + 512])  # sizes vram keeps as they are
            owned[lib.vram_torch_alloc(size, 0, W)] = size
            C._cuda_endAllocateCurrentStreamToPool(0)
            C._cuda_releasePool(0, tree_pool)
            current_stream[0] = CAPTURE_STREAM
        elif op < 0.45 and owned:
            ptr = rng.choice(sorted(owned))
            lib.vram_torch_free(ptr, owned.pop(ptr), 0, W)
        elif op < 0.55:
            state = C._cuda_getCheckpointState(0, tree_pool)
            saved = (state, {(b[0], b[1]) for b in state.blocks})
            bad += sorted(p for p, _ in saved[1]) != sorted(set(owned) | set(adopters))
        elif op < 0.7 and saved:
            state, listed = saved  # (address, size) pairs: a block allocated since at a listed
            live = {(p, n) for p, n in owned.items()} | {(p, sizes[p]) for p in adopters}  # address
            missing = {p for p, _ in listed - live}                                    # differs in size
            keep = {p: Storage(p) for p in missing if rng.random() < 0.6}
            try:
                C._cuda_setCheckpointPoolState(0, state, [], [s.impl for s in keep.values()])
                ok = live <= listed
                restored += 1
                for p, n in listed - live:
                    adopters[p], sizes[p] = ([keep[p]] if p in keep else []), n
            except RuntimeError as e:
                ok = not live <= listed and "not in the checkpoint" in str(e)
                refused += 1
            bad += not ok
        elif op < 0.8 and adopters:
            ptr = rng.choice(sorted(adopters))
            if adopters[ptr]:
                rng.choice(adopters[ptr]).alive = False  # an output dies: freed at the next sweep
                if not any(s.alive for s in adopters[ptr]):
                    del adopters[ptr]
            else:
                C._cuda_cudaCachingAllocator_raw_delete(ptr)  # a dead output's block, as the trees free it
                del adopters[ptr]
        elif op < 0.85 and adopters:
            ptr = rng.choice(sorted(adopters))
            if adopters[ptr]:
                C._free_And_Remove_DeleterFn(adopters.pop(ptr)[0].impl)
        bad += not C._cuda_checkPoolLiveAllocations(0, tree_pool, set(owned) | set(adopters))
        if bad > before and first_bad is None:
            first_bad = "step %d, operation %.2f" % (step, op)
    for ptr, size in owned.items():
        lib.vram_torch_free(ptr, size, 0, W)
    for ptr, storages in adopters.items():
        if storages:
            for s in storages:
                s.alive = False
        else:
            C._cuda_cudaCachingAllocator_raw_delete(ptr)
    if not C._cuda_checkPoolLiveAllocations(0, tree_pool, set()):
        bad += 1
        first_bad = first_bad or "the end"
    return bad, first_bad, restored, refused


from vram_torch import graph_trees  # noqa: E402
bad, first_bad, restored, refused = random_restores(3000, 7)
check(bad == 0 and restored > 50 and refused > 20 and graph_trees.held() == [],
      "3,000 random pool operations with checkpoints: the pool's live blocks always the model's (%d "
      "mismatches, the first at %s), %d restores, %d refused, no recreated block left"
      % (bad, first_bad, restored, refused))
tree_graph.reset()
torch.cuda.empty_cache()
check(torch.cuda.memory_reserved() == 0, "the tree's pool, released, gives everything back: %d" % torch.cuda.memory_reserved())
# `python -m vram_torch run --summary prog.py arg`, in this process: the program's own torch.cuda
# calls answer from vram, its exit status comes back, the summary goes to stderr.
import io  # noqa: E402
import tempfile  # noqa: E402
from contextlib import redirect_stderr, redirect_stdout  # noqa: E402
from vram_torch.__main__ import main as vram_torch_main  # noqa: E402
with tempfile.TemporaryDirectory() as tmp:
    prog = os.path.join(tmp, "prog.py")
    with open(prog, "w") as f:
        f.write("import sys, torch, vram_torch\n"
                "print('enabled', vram_torch.is_enabled(), 'allocated', torch.cuda.memory_allocated(), 'args', sys.argv[1:])\n"
                "sys.exit(5)\n")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = vram_torch_main(["run", "--summary", prog, "--", "hello", "--summary"])
    check(status == 5 and "enabled True allocated 0 args ['--', 'hello', '--summary']" in out.getvalue(),
          "vram_torch run: %d %r (the program's arguments as given, its '--' too)" % (status, out.getvalue()))
    check("Allocated memory" in err.getvalue(), "--summary prints vram's summary")
try:
    vram_torch.set_per_process_memory_fraction(1.5)
    check(False, "a fraction above 1 must fail")
except RuntimeError as e:
    check("memory fraction 1.5 is not in (0, 1]" in str(e), "says why (the allocator's reason): %s" % e)


def expect_raises(kind, fn, what):
    try:
        fn()
        check(False, "%s must raise %s" % (what, kind.__name__))
    except kind as e:
        check(True, "%s: %s" % (what, e))
        return str(e)
    return ""


# Devices are checked as PyTorch checks them: a bad one never reaches another device's allocator
# (ctypes would cut 2**32 + 1 to 1, and -1 means "every device" to the library).
for bad in (-1, 2, 2 ** 32 + 1, "cuda:9", "cpu"):
    msg = expect_raises(ValueError, lambda: vram_torch.memory_stats(bad), "memory_stats(%r)" % (bad,))
    if bad != "cpu":  # out of range: also PyTorch's RuntimeError ("Invalid device argument")
        expect_raises(RuntimeError, lambda: vram_torch.memory_allocated(bad), "memory_allocated(%r)" % (bad,))
    check("2 CUDA devices" in msg or "not a CUDA device" in msg, "names the device count or type: %s" % msg)
    expect_raises(ValueError, lambda: vram_torch.empty_cache(bad), "empty_cache(%r)" % (bad,))
    expect_raises(ValueError, lambda: vram_torch.set_per_process_memory_fraction(0.001, bad), "fraction on %r" % (bad,))
expect_raises(TypeError, lambda: vram_torch.memory_allocated(True), "device True")
expect_raises(RuntimeError, lambda: vram_torch.memory_stats("tpu:0"), "device 'tpu:0'")
expect_raises(TypeError, lambda: vram_torch.set_per_process_memory_fraction("0.5"), "fraction '0.5'")
expect_raises(ValueError, lambda: vram_torch.record_memory_history("off"), "record_memory_history('off')")
expect_raises(TypeError, lambda: vram_torch.record_memory_history(max_entries=1.5), "max_entries 1.5")
expect_raises(TypeError, lambda: vram_torch.record_stream(None, types.SimpleNamespace(cuda_stream=1)), "record_stream(None)")
expect_raises(TypeError, lambda: vram_torch.record_stream(Tensor(0x1000), object()), "record_stream with no stream")
cpu_tensor = Tensor(0x1000)
cpu_tensor.is_cuda = False
expect_raises(TypeError, lambda: vram_torch.record_stream(cpu_tensor, types.SimpleNamespace(cuda_stream=1)), "a CPU tensor")
check(vram_torch.set_per_process_memory_fraction(1.0, 1) is None, "device 1 of 2 is fine")
vram_torch.set_per_process_memory_fraction(0.25, 1)
check(vram_torch.get_per_process_memory_fraction(1) == 0.25 and torch.cuda.get_per_process_memory_fraction(1) == 0.25,
      "get_per_process_memory_fraction reads it back, also as torch.cuda's")
vram_torch.set_per_process_memory_fraction(1.0, 1)
expect_raises(ValueError, lambda: vram_torch.get_per_process_memory_fraction(99), "the fraction of device 99")
# caching_allocator_enable: off returns the cache and every later free's memory at once; on caches again
keep = lib.vram_torch_alloc(8 << 20, 0, None)
gone = lib.vram_torch_alloc(16 << 20, 0, None)
lib.vram_torch_free(gone, 16 << 20, 0, None)
check(vram_torch.memory_reserved(0) >= vram_torch.memory_allocated(0) + (16 << 20), "16 MiB cached")
vram_torch.caching_allocator_enable(False)
check(not vram_torch.caching_allocator_enabled(0) and not vram_torch.caching_allocator_enabled(1),
      "caching off on every device")
reserved_off = vram_torch.memory_reserved(0)
check(reserved_off < vram_torch.memory_allocated(0) + (16 << 20), "the cache returned: %d reserved" % reserved_off)
gone = lib.vram_torch_alloc(32 << 20, 0, None)
held = vram_torch.memory_reserved(0)
lib.vram_torch_free(gone, 32 << 20, 0, None)
check(vram_torch.memory_reserved(0) <= reserved_off < held, "a free returns its memory while caching is off")
vram_torch.caching_allocator_enable(True)
gone = lib.vram_torch_alloc(32 << 20, 0, None)
held = vram_torch.memory_reserved(0)
lib.vram_torch_free(gone, 32 << 20, 0, None)
check(vram_torch.caching_allocator_enabled(0) and vram_torch.memory_reserved(0) == held > reserved_off,
      "caching on again: the free is cached")
lib.vram_torch_free(keep, 8 << 20, 0, None)
# set_allocator_settings (torch.cuda.memory._set_allocator_settings under vram): applied to the
# running allocators at once and quietly, expandable_segments too (new memory as segments while
# it is off, as PyTorch's); refused when bad
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    vram_torch.set_allocator_settings("expandable_segments:True")
    vram_torch.set_allocator_settings("garbage_collection_threshold:0.5,roundup_power2_divisions:4")
    vram_torch.set_allocator_settings("expandable_segments:False")
    off = dict(item.split(":", 1) for item in vram_torch.alloc_conf(1).split(","))
    seg = lib.vram_torch_alloc(64 << 20, 1, None)  # more than cuda:1's mapped pages hold: a segment
    vram_torch.set_allocator_settings("expandable_segments:True")
    said = [str(w.message) for w in caught]
check(not said and off.get("expandable_segments") == "False", "set_allocator_settings on running allocators, quiet: %s %s"
      % (said, off))
check(any(s["address"] <= seg < s["address"] + s["total_size"] and not s["is_expandable"]
          for s in vram_torch.snapshot(1)["segments"]), "expandable_segments off at run time: the new memory is a segment")
lib.vram_torch_free(seg, 64 << 20, 1, None)
running = dict(item.split(":", 1) for item in vram_torch.alloc_conf(1).split(","))
check(running.get("garbage_collection_threshold") == "0.5" and running.get("roundup_power2_divisions") == "4"
      and running.get("expandable_segments") == "True", "cuda:1's running allocator took the settings: %s" % running)
before = vram_torch.memory_allocated(0)
gone = lib.vram_torch_alloc((5 << 20) + 1, 0, None)
check(vram_torch.memory_allocated(0) - before == 6 << 20, "the next request follows the new rounding (5 MiB + 1 -> 6 "
      "MiB): %d" % (vram_torch.memory_allocated(0) - before))
lib.vram_torch_free(gone, (5 << 20) + 1, 0, None)
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")  # (the pages model's note on max_split_size_mb)
    vram_torch.set_allocator_settings("max_split_size_mb:64")
check(vram_torch.memory_stats(0)["max_split_size"] == 64 << 20 and vram_torch.memory_stats(1)["max_split_size"] == 64 << 20,
      "memory_stats() reports the split limit set at run time: %d" % vram_torch.memory_stats(0)["max_split_size"])
vram_torch.set_allocator_settings("expandable_segments:True,garbage_collection_threshold:0.8,roundup_power2_divisions:1")
expect_raises(ValueError, lambda: vram_torch.set_allocator_settings("garbage_collection_threshold:2"), "a bad threshold")
expect_raises(RuntimeError, lambda: vram_torch.set_allocator_settings("max_split_size_mb:oops"),
              "a bad value, caught as PyTorch's own call raises (RuntimeError)")
expect_raises(TypeError, lambda: vram_torch.set_allocator_settings(b"expandable_segments:True"), "bytes settings")
# the options each device's allocator runs with (tests/test_torch_conf.py: where they come from)
conf = dict(item.split(":", 1) for item in vram_torch.alloc_conf().split(","))
check(conf.get("expandable_segments") == "True" and conf.get("caching") == "True", "alloc_conf(): %s" % conf)
check(vram_torch.alloc_conf("cuda:1") == vram_torch.alloc_conf(0), "the same options on device 1")
expect_raises(ValueError, lambda: vram_torch.alloc_conf(5), "alloc_conf(5)")
sys.exit(done("test_vram_torch_cpu"))

"""vram_torch — vram's caching allocator under an unchanged PyTorch program.

    import vram_torch
    vram_torch.enable()          # before the first CUDA tensor
    ... the training script, unchanged ...
    print(vram_torch.memory_summary())

enable() loads libvram_torch.so and makes it PyTorch's CUDA allocator through
torch.cuda.memory.CUDAPluggableAllocator. PyTorch's own memory_stats(), memory_summary(),
max_memory_allocated(), empty_cache(), ... do not reach a pluggable allocator (they raise or do
nothing), so this module has the same functions, answered by vram through ctypes (nothing is
compiled), and enable() points torch.cuda's at them too (torch_routes.py), so that a script that
logs torch.cuda.max_memory_allocated() or calls torch.cuda.empty_cache() or
Tensor.record_stream() runs unchanged; the memory history keeps Python stacks
(record_memory_history), out-of-memory observers are called (attach_out_of_memory_observer),
and the plug-in itself feeds PyTorch's profiler and answers the allocator calls PyTorch makes
from C++ (cuDNN's benchmark mode, C++ record_stream). The settings a user gave PyTorch's allocator
(PYTORCH_CUDA_ALLOC_CONF, _set_allocator_settings, caching_allocator_enable) apply to vram's
(alloc_conf() shows what is in force), and torch.accelerator's memory functions answer from vram
too. CUDA graphs captured with torch.cuda.graph /
torch.cuda.CUDAGraph keep their memory in private pools, as under PyTorch's allocator (graphs.py),
and the workers a program starts with torch.multiprocessing.spawn enable vram too (spawn.py).
The library is looked for in $VRAM_TORCH_LIBRARY, beside this package, then in the repository's
build folders (build/, b/, build-release/).

track() starts memory by category (tracker.py): categories() returns the record per step and
phase, leaks() the memory growing step over step (track(leaks=True)), explain_oom() the last
out-of-memory with its categories and remedies; `python -m vram_torch run --categories --leaks`
does it for an unchanged script.

`python -m vram_torch record -o run.trace script.py args...` records any PyTorch program's
allocations as a memtrace v1 file for `vram replay` (see vram_torch/record.py).
"""
import ctypes
import os
import sys

from . import graph_trees

__version__ = "0.1.0"  # CMakeLists.txt's project(VERSION); the library must be built as the same (_load)
__all__ = [
    "enable", "is_enabled", "library_path", "memory_stats", "memory_summary", "memory_allocated",
    "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "empty_cache", "snapshot", "record_stream",
    "set_per_process_memory_fraction", "oom_report", "record_memory_history", "history_count",
    "attach_out_of_memory_observer", "get_per_process_memory_fraction", "alloc_conf",
    "set_allocator_settings", "caching_allocator_enable", "caching_allocator_enabled", "AllocatorSettingsError",
    "InvalidDeviceError", "TorchMissingError", "track", "categories", "leaks", "explain_oom", "mark_step",
]
_HISTORY_MAX = 1 << 24  # VRAM_HISTORY_MAX (vram/config.h)
# The plug-in's out-of-memory observer: (device, bytes asked, the allocator's limit, bytes free).
_OOM_OBSERVER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong)
_oom_observers = []
_oom_trampoline = None  # kept alive while the plug-in may call it

_lib = None
_enabled = False
_allocator = None  # keeps the CUDAPluggableAllocator alive


def library_path():
    """The libvram_torch.so this module would load, or None."""
    env = os.environ.get("VRAM_TORCH_LIBRARY")
    if env:  # a path (a bare name found here would otherwise go to the loader's search path)
        return os.path.abspath(env) if os.path.exists(env) else env
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    for cand in [os.path.join(here, "libvram_torch.so")] + [
            os.path.join(repo, d, "libvram_torch.so") for d in ("build", "b", "build-release")]:
        if os.path.exists(cand):
            return cand
    return None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if path and not os.path.exists(path):
        raise RuntimeError("vram_torch: VRAM_TORCH_LIBRARY=%s: no such file" % path)
    if not path:
        raise RuntimeError(
            "vram_torch: libvram_torch.so not found (looked at $VRAM_TORCH_LIBRARY, beside the "
            "vram_torch package and in the repository's build/, b/ and build-release/); build it "
            "with `make` or set VRAM_TORCH_LIBRARY")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:  # not a library, or one it needs is missing: the loader's reason
        raise RuntimeError("vram_torch: cannot load %s: %s" % (path, e)) from None
    c_int, c_char_p, c_void_p, c_double = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_double
    sig = {
        "vram_torch_use_c10": (c_int, [c_char_p]),
        "vram_torch_patch_pluggable": (c_int, [c_char_p]),
        "vram_torch_last_error": (c_char_p, []),
        "vram_torch_device_active": (c_int, [c_int]),
        "vram_torch_check_config": (c_int, []),
        "vram_torch_alloc_conf": (c_void_p, [c_int]),
        "vram_torch_set_allocator_settings": (c_void_p, [c_char_p]),
        "vram_torch_set_caching": (c_int, [c_int]),
        "vram_torch_record_stream": (c_int, [c_void_p, c_int, c_void_p]),
        "vram_torch_empty_cache": (c_int, [c_int]),
        "vram_torch_reset_peak": (c_int, [c_int]),
        "vram_torch_reset_accumulated": (c_int, [c_int]),
        "vram_torch_set_memory_fraction": (c_int, [c_double, c_int]),
        "vram_torch_get_memory_fraction": (c_int, [c_int, ctypes.POINTER(c_double)]),
        "vram_torch_set_history": (c_int, [ctypes.c_uint, c_int]),
        "vram_torch_history_count": (ctypes.c_longlong, [c_int]),
        "vram_torch_set_stacks": (c_int, [c_int]),
        "vram_torch_block_stacks": (None, [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t,
                                           ctypes.POINTER(ctypes.c_uint)]),
        "vram_torch_stacks_json": (c_void_p, [ctypes.POINTER(ctypes.c_uint), ctypes.c_size_t]),
        "vram_torch_stacks_count": (ctypes.c_longlong, [ctypes.POINTER(ctypes.c_ulonglong)]),
        "vram_torch_set_oom_observer": (None, [_OOM_OBSERVER]),
        "vram_torch_graph_pool": (c_int, [c_int, ctypes.c_ulonglong, ctypes.c_ulonglong, c_int]),
        "vram_torch_graph_pool_stream": (c_int, [c_int, ctypes.c_ulonglong, ctypes.c_ulonglong, c_int, c_void_p]),
        "vram_torch_graph_pool_live_equal": (c_int, [ctypes.c_ulonglong, ctypes.c_ulonglong, c_int,
                                                     ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]),
        "vram_torch_graph_pool_blocks": (c_int, [ctypes.c_ulonglong, ctypes.c_ulonglong, c_int,
                                                 ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t,
                                                 ctypes.POINTER(ctypes.c_size_t)]),
        "vram_torch_graph_pool_recreate": (c_int, [ctypes.c_ulonglong, ctypes.c_ulonglong, c_int,
                                                   ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t,
                                                   ctypes.POINTER(ctypes.c_ubyte)]),
        "vram_torch_free": (None, [c_void_p, ctypes.c_ssize_t, c_int, c_void_p]),
        "vram_torch_oom_report": (c_char_p, [c_int]),
        "vram_torch_string_free": (None, [c_void_p]),
        "vram_torch_stats_text": (c_void_p, [c_int]),
        "vram_torch_summary": (c_void_p, [c_int, c_int]),
        "vram_torch_snapshot_json": (c_void_p, [c_int]),
        "vram_torch_version": (c_char_p, []),
    }
    for name, (res, args) in sig.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise RuntimeError("vram_torch: %s has no %s: not the libvram_torch.so of this vram_torch (an older "
                               "build?); rebuild it with `make`" % (path, name)) from None
        fn.restype, fn.argtypes = res, args
    built = lib.vram_torch_version().decode()
    if built != __version__:
        raise RuntimeError("vram_torch %s: %s is libvram_torch.so %s; use the library of the same vram (rebuild "
                           "with `make`, or reinstall)" % (__version__, path, built))
    lib._path = path
    _lib = lib
    return lib


class InvalidDeviceError(ValueError, RuntimeError):
    """A device index out of range: a ValueError, as vram_torch documents, and a RuntimeError, as
    PyTorch's own memory functions raise ("Invalid device argument"), so that code written against
    either catches it."""


class AllocatorSettingsError(ValueError, RuntimeError):
    """An allocator setting vram refused (a malformed string, a bad value, or a change a running
    allocator cannot take now). A ValueError, as vram_torch documents, and a RuntimeError, as
    PyTorch's own torch.cuda.memory._set_allocator_settings raises, so that code written against
    either catches it."""


def _error(what):
    return RuntimeError("vram_torch: %s: %s" % (what, _lib.vram_torch_last_error().decode(errors="replace")))


def _take_string(ptr, what):
    if not ptr:
        raise _error(what)
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        _lib.vram_torch_string_free(ptr)


def _graph_pool(op, key, device):
    """A CUDA graph's private pool in vram (graphs.py): op 0 begin, 1 end, 2 release."""
    if _lib.vram_torch_graph_pool(op, key[0], key[1], device) != 0:
        raise _error("%s of CUDA graph pool %s on cuda:%d" % (("begin", "end", "release")[op], key, device))


def _graph_pool_bind(key, device, stream):
    """Names a begun capture into the pool by its stream (graphs.py); the error text, or None."""
    if _lib.vram_torch_graph_pool_stream(0, key[0], key[1], device, stream) != 0:
        return _lib.vram_torch_last_error().decode(errors="replace")
    return None


def _graph_pool_release_quietly(key, device):
    """The release a graph's finalizer makes (at collection or exit, where raising helps nobody)."""
    if _lib is not None:
        _lib.vram_torch_graph_pool(2, key[0], key[1], device)


def is_enabled():
    return _enabled


class TorchMissingError(ImportError):
    """PyTorch is not importable where a function of this module needs it."""


def _import_torch(what):
    """torch, or TorchMissingError saying plainly that `what` (as the user called it) needs
    PyTorch, without the chained ModuleNotFoundError traceback: vram_torch is imported on
    machines without it (the vram command and library need none)."""
    try:
        import torch
    except ImportError as e:
        raise TorchMissingError(
            "%s needs PyTorch, which %s cannot import (%s). Install PyTorch with CUDA "
            "(https://pytorch.org) into this Python; vram's C library and the `vram` command work without it."
            % (what, sys.executable or "this Python", e)) from None
    return torch


def enable(route_torch=True):
    """Makes vram PyTorch's CUDA allocator. Must run before the first CUDA allocation. With
    route_torch, torch.cuda's memory functions and Tensor.record_stream answer from vram. A second
    call swaps nothing; with route_torch it routes what an earlier enable(route_torch=False) left."""
    global _enabled, _allocator
    torch = _import_torch("vram_torch.enable()")
    if _enabled:
        if route_torch:
            _route(torch)
        return
    lib = _load()
    if lib.vram_torch_check_config() != 0:
        raise ValueError("vram_torch.enable(): %s" % lib.vram_torch_last_error().decode(errors="replace"))
    if torch.cuda.is_initialized():
        try:
            held = torch.cuda.memory_reserved()
        except RuntimeError:
            held = None
        raise RuntimeError(
            "vram_torch.enable() must run before CUDA is first used: PyTorch's allocator is already "
            "initialized%s. Call it at the top of the script, before any tensor is put on the GPU."
            % ("" if held is None else " and holds %d bytes" % held))
    if torch.version.cuda is None:  # its torch._C lacks the CUDA calls: PyTorch would raise AttributeError
        raise RuntimeError("vram_torch.enable(): this PyTorch %s is built without CUDA (a CPU-only or ROCm build): "
                           "vram is a CUDA allocator" % torch.__version__)
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    alloc = torch.cuda.memory.CUDAPluggableAllocator(lib._path, "vram_torch_alloc", "vram_torch_free")
    try:
        torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise RuntimeError("vram_torch.enable() must run before the first CUDA allocation (%s)" % e) from None
    # Now that PyTorch's libraries are loaded, an out-of-memory can be thrown as
    # c10::OutOfMemoryError (torch.OutOfMemoryError); otherwise it is a RuntimeError.
    if not lib.vram_torch_use_c10(torch_lib.encode()):
        import warnings
        warnings.warn("vram_torch: out-of-memory will raise RuntimeError, not torch.OutOfMemoryError (%s)"
                      % lib.vram_torch_last_error().decode(errors="replace"))
    # PyTorch's C++ asks the allocator's cacheInfo (torch.backends.cudnn.benchmark), which the
    # pluggable allocator raises on, and its recordStream (ProcessGroupNCCL), which it drops: the
    # plug-in answers both instead (src/torch/pluggable_patch.cpp).
    if not lib.vram_torch_patch_pluggable(torch_lib.encode()):
        import warnings
        warnings.warn("vram_torch: PyTorch's allocator object could not be given vram's cacheInfo and recordStream "
                      "(%s): torch.backends.cudnn.benchmark may fail and C++ record_stream calls (NCCL) do nothing"
                      % lib.vram_torch_last_error().decode(errors="replace"))
    _allocator = alloc
    _enabled = True
    from . import graphs, spawn
    graphs.install(torch, sys.modules[__name__])  # graph correctness: not optional
    graph_trees.install(torch, sys.modules[__name__])  # torch.compile(mode="reduce-overhead")
    spawn.install(torch)  # workers of torch.multiprocessing.spawn enable vram too
    if route_torch:
        _route(torch)


def _route(torch):
    from . import torch_routes
    torch_routes.route(torch, sys.modules[__name__])  # idempotent


def _device(device):
    """The CUDA ordinal of device (None: the current one; an int, "cuda:N" or a torch.device),
    checked against the devices this process sees, as PyTorch checks it. Before CUDA starts the
    current device is 0: asking PyTorch (torch.cuda.current_device()) would start CUDA, and
    enable() would then refuse."""
    torch = _import_torch("a vram_torch function given a device")
    if isinstance(device, bool):
        raise TypeError("vram_torch: device must be an int, a string or a torch.device, not a bool")

    def current():
        return torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    if device is None:
        d = current()
    elif isinstance(device, int):
        d = device
    else:
        dev = torch.device(device)
        if getattr(dev, "type", "cuda") != "cuda":
            raise ValueError("vram_torch: %r is not a CUDA device" % (device,))
        d = dev.index if dev.index is not None else current()
    n = torch.cuda.device_count()
    if not 0 <= d < n:
        raise InvalidDeviceError("vram_torch: invalid device %r (this process sees %d CUDA device%s)"
                         % (device, n, "" if n == 1 else "s"))
    return d


def _require_enabled(what):
    if not _enabled:
        raise RuntimeError("vram_torch.%s: vram is not PyTorch's allocator yet; call vram_torch.enable() "
                           "first" % what)


def _active(device):
    return _load().vram_torch_device_active(device)


def memory_stats(device=None):
    """PyTorch's memory_stats() keys (allocated_bytes.all.current, ...), plus tags.*. Once vram is
    enabled, a device without allocations yet has every key, at zero, as under PyTorch (without
    starting anything on that GPU); before enable(), none ({})."""
    graph_trees.sweep()  # outputs of restored CUDA graph trees that died: freed lazily (graph_trees.py)
    d = _device(device)
    if not _active(d) and not _enabled:
        return {}
    text = _take_string(_lib.vram_torch_stats_text(d), "memory_stats")
    out = {}
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        out[key] = int(value)
    return dict(sorted(out.items()))


def _stat(key, device):
    return memory_stats(device).get(key, 0)


def memory_allocated(device=None):
    return _stat("allocated_bytes.all.current", device)


def max_memory_allocated(device=None):
    return _stat("allocated_bytes.all.peak", device)


def memory_reserved(device=None):
    return _stat("reserved_bytes.all.current", device)


def max_memory_reserved(device=None):
    return _stat("reserved_bytes.all.peak", device)


def reset_peak_memory_stats(device=None):
    d = _device(device)
    if _active(d) and _lib.vram_torch_reset_peak(d) != 0:
        raise _error("reset_peak_memory_stats")


def reset_accumulated_memory_stats(device=None):
    d = _device(device)
    if _active(d) and _lib.vram_torch_reset_accumulated(d) != 0:
        raise _error("reset_accumulated_memory_stats")


def memory_summary(device=None, abbreviated=False):
    """PyTorch's memory_summary() table, plus vram's memory by tag."""
    graph_trees.sweep()
    d = _device(device)
    if not _active(d) and not _enabled:
        return "vram: not enabled (vram_torch.enable() makes vram PyTorch's allocator)\n"
    return _take_string(_lib.vram_torch_summary(d, 1 if abbreviated else 0), "memory_summary")


def empty_cache(device=None):
    """Returns vram's cached memory to the driver (every device when device is None)."""
    graph_trees.sweep()
    _load()
    if _lib.vram_torch_empty_cache(-1 if device is None else _device(device)) != 0:
        raise _error("empty_cache")


def snapshot(device=None):
    """The allocator's segments, blocks and recent events, as a dict (PyTorch's _snapshot layout),
    with the Python stacks record_memory_history kept in their "frames". device None: every device,
    as torch.cuda.memory._snapshot() gives it (each segment names its "device"; "device_traces"
    has one list per device this process sees, by index); a device: its segments alone, its
    events at its index."""
    graph_trees.sweep()
    import json
    torch = _import_torch("vram_torch.snapshot()")
    n = torch.cuda.device_count()
    snap = {"segments": [], "device_traces": [[] for _ in range(n)]}
    read = False
    for d in range(n) if device is None else [_device(device)]:
        if not _active(d):
            continue
        read = True
        one = json.loads(_take_string(_lib.vram_torch_snapshot_json(d), "snapshot"))
        snap["segments"] += one.pop("segments")
        snap["device_traces"][d] = one.pop("device_traces")[0]
        for key, value in one.items():  # allocator_settings, tag_names: the first device's
            snap.setdefault(key, value)
    if read:
        _fill_frames(snap)
    return snap


def _fill_frames(snap):
    """Puts the stacks the plug-in kept (by block address, and by the events' "context") into the
    snapshot's "frames" lists."""
    blocks = [b for seg in snap["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"]
    events = [e for trace in snap["device_traces"] for e in trace]
    addrs = (ctypes.c_ulonglong * max(1, len(blocks)))(*[b["address"] for b in blocks])
    ids = (ctypes.c_uint * max(1, len(blocks)))()
    _lib.vram_torch_block_stacks(addrs, len(blocks), ids)
    block_ids = list(ids)[:len(blocks)]
    event_ids = [e.pop("context", 0) for e in events]
    wanted = sorted(set(block_ids + event_ids) - {0})
    if not wanted:
        return
    import json
    frames = json.loads(_take_string(_lib.vram_torch_stacks_json((ctypes.c_uint * len(wanted))(*wanted), len(wanted)),
                                     "stacks"))
    for item, i in zip(blocks + events, block_ids + event_ids):
        if i:
            item["frames"] = frames.get(str(i), [])


def record_stream(tensor, stream):
    """Tensor.record_stream for vram: the block is not reused until `stream`'s work queued
    before the tensor's free has finished. (PyTorch's own Tensor.record_stream does nothing
    under a pluggable allocator.)"""
    if not getattr(tensor, "is_cuda", False) or not hasattr(tensor, "untyped_storage"):
        raise TypeError("vram_torch.record_stream: expected a CUDA tensor, not %s" % type(tensor).__name__)
    if not isinstance(getattr(stream, "cuda_stream", None), int):
        raise TypeError("vram_torch.record_stream: expected a torch.cuda.Stream, not %s" % type(stream).__name__)
    storage = tensor.untyped_storage()
    rc = _load().vram_torch_record_stream(ctypes.c_void_p(storage.data_ptr()), tensor.device.index,
                                          ctypes.c_void_p(stream.cuda_stream))
    if rc != 0:
        raise _error("record_stream")


def set_per_process_memory_fraction(fraction, device=None):
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError("vram_torch.set_per_process_memory_fraction: fraction must be a number, not %s"
                        % type(fraction).__name__)
    _require_enabled("set_per_process_memory_fraction")
    d = _device(device)
    if _load().vram_torch_set_memory_fraction(float(fraction), d) != 0:
        raise _error("set_per_process_memory_fraction")


def get_per_process_memory_fraction(device=None):
    """The memory fraction in force on the device (1.0 when none was set): what
    torch.cuda.get_per_process_memory_fraction answers, which raises under any other pluggable
    allocator."""
    _require_enabled("get_per_process_memory_fraction")
    fraction = ctypes.c_double(0.0)
    if _load().vram_torch_get_memory_fraction(_device(device), ctypes.byref(fraction)) != 0:
        raise _error("get_per_process_memory_fraction")
    return fraction.value


_STACK_MODES = {None: 0, "state": 1, "alloc": 2, "all": 3}


def record_memory_history(enabled="all", max_entries=100000, device=None, context="all", stacks="python"):
    """Keeps the last max_entries allocator events (alloc, free, segment map/unmap, oom,
    empty_cache) for snapshot()'s "device_traces", as PyTorch's _record_memory_history does for
    its allocator, and the Python stack of each allocation in the "frames" of snapshot()'s
    blocks and events: context="state" the live blocks' only, "alloc" also the allocation
    events', "all" also the frees'; None, or stacks=None, none. (stacks="all" asks PyTorch for
    C++ frames too; vram records the Python ones.) enabled=None (or False) stops and drops
    them. device None: every device, those vram starts on later included (PyTorch's history is
    process-wide); a device: that one alone."""
    if enabled not in (None, False, True, "state", "all"):
        raise ValueError("record_memory_history: enabled must be None, 'state' or 'all' (or a bool), not %r"
                         % (enabled,))
    if context not in _STACK_MODES:
        raise ValueError("record_memory_history: context must be None, 'state', 'alloc' or 'all', not %r" % (context,))
    if stacks not in (None, "python", "all"):
        raise ValueError("record_memory_history: stacks must be None, 'python' or 'all', not %r" % (stacks,))
    if isinstance(max_entries, bool) or not isinstance(max_entries, int):
        raise TypeError("record_memory_history: max_entries must be an int, not %s" % type(max_entries).__name__)
    if max_entries < 0:
        raise ValueError("record_memory_history: max_entries must be >= 0, not %d" % max_entries)
    _require_enabled("record_memory_history")
    n = 0 if enabled is None or enabled is False else min(max_entries, _HISTORY_MAX)  # False: the old API's "off"
    if _load().vram_torch_set_history(n, -1 if device is None else _device(device)) != 0:
        raise _error("record_memory_history")
    mode = _STACK_MODES[context] if n and stacks else 0
    if _lib.vram_torch_set_stacks(mode) != 0:
        import warnings
        warnings.warn("vram_torch.record_memory_history: %s; frames stay empty"
                      % _lib.vram_torch_last_error().decode(errors="replace"), RuntimeWarning, stacklevel=2)


def history_count(device=None):
    """How many events the history has recorded since record_memory_history started it, the
    ones its ring no longer keeps included (0 when it is off): snapshot()'s "device_traces" hold
    the last min(count, max_entries) of them, so a count taken earlier marks a place in them."""
    _require_enabled("history_count")
    return int(_load().vram_torch_history_count(_device(device)))


def attach_out_of_memory_observer(observer):
    """torch._C._cuda_attach_out_of_memory_observer under vram (PyTorch's raises under any
    pluggable allocator): observer(device, alloc, device_total, device_free) is called when vram
    runs out of memory, before torch.OutOfMemoryError is raised, with the bytes asked, the memory
    vram may use on the device (its limit: the device's, or the memory fraction's) and the bytes
    free there; e.g. to dump a snapshot of the moment (torch.cuda.memory._dump_snapshot).
    Observers add up; an exception in one is printed and the others still run."""
    global _oom_trampoline
    if not callable(observer):
        raise TypeError("attach_out_of_memory_observer: expected a callable, not %s" % type(observer).__name__)
    _oom_observers.append(observer)
    if _oom_trampoline is None:
        _oom_trampoline = _OOM_OBSERVER(_observe_oom)
        _load().vram_torch_set_oom_observer(_oom_trampoline)


def _observe_oom(device, alloc, device_total, device_free):
    for observer in list(_oom_observers):
        try:
            observer(device, alloc, device_total, device_free)
        except Exception:  # the plug-in's C++ caller cannot take a Python exception
            import traceback
            sys.stderr.write("vram_torch: an out-of-memory observer raised:\n")
            traceback.print_exc()


def alloc_conf(device=None):
    """The allocator options the device's allocator runs with, as a VRAM_ALLOC_CONF string (before
    its first allocation: those it would start with now). They come from VRAM_ALLOC_CONF, or where
    that is unset from PyTorch's PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF (the options vram
    shares with PyTorch's allocator), then set_allocator_settings and caching_allocator_enable
    (docs/pytorch.md)."""
    torch = _import_torch("vram_torch.alloc_conf()")
    lib = _load()
    # before CUDA starts, the current device is 0: asking PyTorch would start CUDA (and enable() would refuse)
    d = 0 if device is None and not torch.cuda.is_initialized() else _device(device)
    return _take_string(lib.vram_torch_alloc_conf(d), "alloc_conf")


def set_allocator_settings(settings):
    """torch.cuda.memory._set_allocator_settings for vram (enable() routes PyTorch's to it): the
    options, in PyTorch's syntax, apply at once to the devices whose allocator runs (rounding,
    splitting, garbage collection, memory fraction, pages or segments for new memory: the next
    requests follow them, as under PyTorch's own allocator) and to every device's allocator that
    starts afterwards, on top of PYTORCH_CUDA_ALLOC_CONF / VRAM_ALLOC_CONF. What they cannot change
    (options vram lacks, and expandable_segments:True on a device whose allocator started with
    segments) is said in one warning; a malformed string or a bad value raises AllocatorSettingsError
    (a ValueError and, as PyTorch's own call raises, a RuntimeError) and changes nothing, as does
    switching garbage collection during a CUDA graph capture."""
    if not isinstance(settings, str):
        raise TypeError("vram_torch.set_allocator_settings: settings must be a str, not %s" % type(settings).__name__)
    lib = _load()
    ptr = lib.vram_torch_set_allocator_settings(settings.encode())
    if not ptr:
        raise AllocatorSettingsError("vram_torch.set_allocator_settings: %s"
                                     % lib.vram_torch_last_error().decode(errors="replace"))
    notes = _take_string(ptr, "set_allocator_settings")
    if notes:
        import warnings
        warnings.warn("vram: " + notes, stacklevel=2)


def caching_allocator_enable(value=True):
    """torch.cuda.memory.caching_allocator_enable for vram (enable() routes PyTorch's to it):
    False returns every device's cache to the driver and makes each later free return its memory
    at once (as PYTORCH_NO_CUDA_MEMORY_CACHING=1 or VRAM_ALLOC_CONF=caching:False from the start);
    True caches again. Devices whose allocator starts later follow it too."""
    lib = _load()
    if lib.vram_torch_set_caching(1 if value else 0) != 0:
        raise _error("caching_allocator_enable(%r)" % (value,))


def caching_allocator_enabled(device=None):
    """Whether the device's allocator caches freed memory (caching_allocator_enable)."""
    return "caching:True" in alloc_conf(device).split(",")


def oom_report(device=None):
    """The report of the last out-of-memory on the device ("" if none)."""
    return _load().vram_torch_oom_report(_device(device)).decode(errors="replace")


def track(leaks=False, program=None):
    """Starts memory by category (and with leaks, the leak finder) for the rest of the program:
    hooks on modules, backward and optimizers that re-tag blocks as PyTorch reveals what they
    are (tracker.py). After enable(); a second call returns the running tracker."""
    _require_enabled("track")
    from . import tracker as cat
    return cat.start(_import_torch("vram_torch.track()"), sys.modules[__name__], leaks=leaks, program=program)


def _tracker(what):
    from . import tracker as cat
    t = cat.current()
    if t is None:
        raise RuntimeError("vram_torch.%s: no tracker runs; call vram_torch.track() (or use python -m vram_torch "
                           "run --categories)" % what)
    return t


def categories():
    """Memory by category, per step and phase, as a dict (category_report.py describes it): each
    phase's peak allocated with the categories at that moment (they add up to it), the peak
    reserved, reserved-but-free and fragmentation."""
    return _tracker("categories").record()


def mark_step():
    """Ends a step by hand, for programs without an optimizer step (inference)."""
    _tracker("mark_step").end_step()


def leaks():
    """The leaks found so far (leak_finder.py): memory surviving step boundaries and growing step over
    step, by category and by the program line that allocated it. Needs track(leaks=True)."""
    t = _tracker("leaks")
    if t.leaks is None:
        raise RuntimeError("vram_torch.leaks: the tracker runs without the leak finder; track(leaks=True)")
    return t.leaks.leaks()


def explain_oom():
    """The last out-of-memory seen while tracking: categories at the failing allocation, memory
    reserved but free, and remedies with predicted peaks (oom_explain.py); None if none."""
    from .oom_explain import explain
    return explain(_tracker("explain_oom").oom)

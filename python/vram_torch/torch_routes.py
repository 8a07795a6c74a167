"""torch_routes.py — PyTorch's own memory functions answered by vram, for unchanged scripts.

Under a pluggable allocator PyTorch's torch.cuda.memory_stats(), max_memory_allocated(),
memory_summary(), ... raise, and torch.cuda.empty_cache(), set_per_process_memory_fraction()
and Tensor.record_stream() do nothing. A script that logs its peak memory or empties the cache
would then fail or silently lose the effect under vram. route(torch, vram_torch), which
vram_torch.enable() calls, replaces those functions (in torch.cuda and torch.cuda.memory),
torch.cuda.memory's _snapshot and _record_memory_history (so that _dump_snapshot writes vram's
state and recent events for PyTorch's memory visualizer), Tensor.record_stream, and these of
torch._C: _cuda_attach_out_of_memory_observer (the usual way to dump a snapshot at an
out-of-memory), _accelerator_setAllocatorSettings (behind torch.cuda.memory._set_allocator_settings,
which is routed itself where a PyTorch lacks it), the _accelerator_* calls behind torch.accelerator's
memory functions (which otherwise read 0 under a pluggable allocator) and
_cuda_cudaCachingAllocator_enable (caching_allocator_enable, otherwise a no-op); all with
vram_torch's, keeping the originals in ORIGINALS.

_routes() maps each torch.cuda name to a function of vram_torch (or a small adapter here); names
a PyTorch version lacks are skipped.
"""

import sys

ORIGINALS = {}


def _nested(flat):
    """PyTorch's memory_stats_as_nested_dict() from the flat "a.b.c" keys."""
    out = {}
    for key, value in flat.items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _record_memory_history(vt):
    """torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="all",
    max_entries=..., device=None, ...) as vram's event ring and Python stacks; also in the legacy
    form PyTorch still takes, enabled a bool: (enabled, record_context=True,
    trace_alloc_max_entries=1, trace_alloc_record_context=False, device=None,
    record_context_cpp=False, ...), whose second argument is not a context string. As PyTorch's,
    it records on every device, whatever `device` says (PyTorch passes it nowhere)."""
    def current(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None, *args, **kwargs):
        vt.record_memory_history(enabled, max_entries, None, context, stacks)  # capped at VRAM_HISTORY_MAX events

    def legacy(enabled, record_context=True, trace_alloc_max_entries=1, trace_alloc_record_context=False,
               device=None, record_context_cpp=False, *args, **kwargs):
        context = ("alloc" if trace_alloc_record_context else "state") if record_context else None
        vt.record_memory_history("all" if enabled else None, trace_alloc_max_entries, None, context,
                                 "all" if record_context_cpp else "python")

    def record(enabled="all", *args, **kwargs):
        return (legacy if isinstance(enabled, bool) else current)(enabled, *args, **kwargs)
    return record


def _set_allocator_settings(vt, original):
    """PyTorch's call to change its allocator's settings: vram's allocators take the options
    (checked first: a bad string raises before anything changes). PyTorch's own call runs only
    for pinned_* options, which its pinned host allocator still reads: for the rest it would set
    up an allocator that no longer runs, and under a pluggable allocator it can fail an internal
    assertion (PyTorch 2.11 with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: run 135)."""
    def set_settings(env, *args, **kwargs):
        vt.set_allocator_settings(env)
        if "pinned_" in str(env):
            return original(env, *args, **kwargs)
        return None
    return set_settings


def _routes(vt):
    return {
        "memory_stats": vt.memory_stats,
        "memory_stats_as_nested_dict": lambda device=None: _nested(vt.memory_stats(device)),
        "memory_allocated": vt.memory_allocated,
        "max_memory_allocated": vt.max_memory_allocated,
        "memory_reserved": vt.memory_reserved,
        "max_memory_reserved": vt.max_memory_reserved,
        "memory_cached": vt.memory_reserved,          # deprecated aliases PyTorch still has
        "max_memory_cached": vt.max_memory_reserved,
        "reset_peak_memory_stats": vt.reset_peak_memory_stats,
        "reset_max_memory_allocated": vt.reset_peak_memory_stats,
        "reset_max_memory_cached": vt.reset_peak_memory_stats,
        "reset_accumulated_memory_stats": vt.reset_accumulated_memory_stats,
        "memory_summary": vt.memory_summary,
        "memory_snapshot": lambda *args, **kwargs: vt.snapshot()["segments"],
        "empty_cache": lambda: vt.empty_cache(None),
        "set_per_process_memory_fraction": vt.set_per_process_memory_fraction,
        "get_per_process_memory_fraction": vt.get_per_process_memory_fraction,
    }


def _accelerator_routes(vt):
    """torch._C's device-generic allocator calls behind torch.accelerator's memory functions
    (PyTorch 2.9+: memory_stats, memory_allocated, max_memory_allocated, ..., empty_cache,
    reset_peak_memory_stats). Under a pluggable allocator PyTorch 2.11 answers them with an
    empty dict (so every figure reads 0) or "Invalid device argument" (run 137); here they
    answer from vram. A negative index, PyTorch's "no index given", means the current device."""
    def device(index):
        return None if index is None or (isinstance(index, int) and not isinstance(index, bool) and index < 0) else index
    return {
        "_accelerator_isAllocatorInitialized": lambda: True,
        "_accelerator_getDeviceStats": lambda index=None: _nested(vt.memory_stats(device(index))),
        "_accelerator_emptyCache": lambda: vt.empty_cache(None),
        "_accelerator_resetAccumulatedStats": lambda index=None: vt.reset_accumulated_memory_stats(device(index)),
        "_accelerator_resetPeakStats": lambda index=None: vt.reset_peak_memory_stats(device(index)),
    }


def _replace(module, key, name, fn):
    """Points module.name at fn, the original (None where the module lacked it) kept in
    ORIGINALS[(key, name)]."""
    ORIGINALS[(key, name)] = getattr(module, name, None)
    setattr(module, name, fn)


def route(torch, vt):
    """Points torch.cuda's memory functions and Tensor.record_stream at vram (idempotent)."""
    if ORIGINALS:
        return
    import torch.cuda.memory as tcm
    for name, fn in _routes(vt).items():
        for module in (torch.cuda, tcm):
            if hasattr(module, name):
                _replace(module, module.__name__, name, fn)
    private = {  # the memory visualizer's entry points: _dump_snapshot pickles _snapshot()
        "_snapshot": lambda device=None, *args, **kwargs: vt.snapshot(None),  # every device, as PyTorch's
        "_record_memory_history": _record_memory_history(vt),
    }
    c_module = getattr(torch, "_C", None)
    c_settings = getattr(c_module, "_accelerator_setAllocatorSettings", None)
    if c_settings is None and hasattr(tcm, "_set_allocator_settings"):  # older PyTorch: the Python call itself
        private["_set_allocator_settings"] = _set_allocator_settings(vt, tcm._set_allocator_settings)
    for name, fn in private.items():
        if hasattr(tcm, name):
            _replace(tcm, tcm.__name__, name, fn)
    c_routes = {name: fn for name, fn in _accelerator_routes(vt).items()  # torch.accelerator's memory functions
                if hasattr(c_module, name)}
    # caching_allocator_enable: PyTorch's C call does nothing under a pluggable allocator (run 137);
    # the query that later PyTorch's caching_allocator_disabled() makes is answered by vram too
    # (PyTorch 2.11 has neither the context manager nor the query)
    if hasattr(c_module, "_cuda_cudaCachingAllocator_enable"):
        c_routes["_cuda_cudaCachingAllocator_enable"] = vt.caching_allocator_enable
        c_routes["_cuda_cudaCachingAllocator_is_enabled"] = lambda: vt.caching_allocator_enabled()
    if c_settings is not None:  # PyTorch 2.11: torch.cuda.memory._set_allocator_settings calls this
        c_routes["_accelerator_setAllocatorSettings"] = _set_allocator_settings(vt, c_settings)
    # OOM observers: PyTorch's raises under a pluggable allocator
    if hasattr(c_module, "_cuda_attach_out_of_memory_observer"):
        c_routes["_cuda_attach_out_of_memory_observer"] = vt.attach_out_of_memory_observer
    for name, fn in c_routes.items():
        _replace(c_module, "torch._C", name, fn)
    original_record_stream = torch.Tensor.record_stream
    ORIGINALS[("torch.Tensor", "record_stream")] = original_record_stream

    def record_stream(self, stream):
        if self.is_cuda:
            vt.record_stream(self, stream)
        else:
            original_record_stream(self, stream)

    torch.Tensor.record_stream = record_stream

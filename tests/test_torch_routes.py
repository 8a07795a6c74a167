"""test_torch_routes.py — vram_torch.torch_routes without PyTorch: on stand-in torch, torch.cuda
and torch.cuda.memory modules, route() points every memory function that exists in both modules
at vram_torch's (skipping names this "PyTorch" lacks), keeps the originals, runs once, builds
memory_stats_as_nested_dict from the flat keys, routes _snapshot, _record_memory_history,
_set_allocator_settings (vram's first, then PyTorch's) and torch._C._cuda_attach_out_of_memory_observer, and sends Tensor.record_stream of CUDA tensors to vram (others to the original). The real thing runs on the GPU in tests/gpu/test_torch_plugin.py."""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from vram_torch import torch_routes  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402


def torch_says(name):
    return lambda *a, **k: "torch:" + name


torch = types.ModuleType("torch")
cuda = types.ModuleType("torch.cuda")
memory = types.ModuleType("torch.cuda.memory")
names = ["memory_stats", "memory_stats_as_nested_dict", "memory_allocated", "max_memory_allocated", "memory_reserved",
         "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats", "memory_summary",
         "memory_snapshot", "empty_cache", "set_per_process_memory_fraction",
         "get_per_process_memory_fraction"]  # no memory_cached: skipped
for n in names:
    setattr(memory, n, torch_says(n))
    setattr(cuda, n, getattr(memory, n))
memory._snapshot = torch_says("_snapshot")
memory._record_memory_history = torch_says("_record_memory_history")
memory._set_allocator_settings = lambda env: calls.append(("torch settings", env))
cuda.memory = memory
torch.cuda = cuda
torch._C = types.SimpleNamespace(_cuda_attach_out_of_memory_observer=torch_says("_cuda_attach_out_of_memory_observer"),
                                 _accelerator_isAllocatorInitialized=lambda: False,  # as under a pluggable allocator
                                 _accelerator_getDeviceStats=torch_says("_accelerator_getDeviceStats"),
                                 _accelerator_emptyCache=torch_says("_accelerator_emptyCache"),
                                 _accelerator_resetPeakStats=torch_says("_accelerator_resetPeakStats"),
                                 _cuda_cudaCachingAllocator_enable=torch_says("_cuda_cudaCachingAllocator_enable"))


class Tensor:
    def __init__(self, is_cuda):
        self.is_cuda = is_cuda

    def record_stream(self, stream):
        calls.append(("torch", stream))


torch.Tensor = Tensor
sys.modules.update({"torch": torch, "torch.cuda": cuda, "torch.cuda.memory": memory})

calls = []
flat = {"allocated_bytes.all.current": 7, "allocated_bytes.all.peak": 9, "num_alloc_retries": 1,
        "tags.other.allocated_bytes.current": 7}
vt = types.SimpleNamespace(
    memory_stats=lambda device=None: dict(flat), memory_allocated=lambda device=None: 7,
    max_memory_allocated=lambda device=None: 9, memory_reserved=lambda device=None: 20,
    max_memory_reserved=lambda device=None: 22, reset_peak_memory_stats=lambda device=None: calls.append("reset_peak" if device is None else ("reset_peak", device)),
    reset_accumulated_memory_stats=lambda device=None: calls.append("reset_accumulated"),
    memory_summary=lambda device=None, abbreviated=False: "vram summary",
    snapshot=lambda device=None: {"segments": ["seg"], "device_traces": [[]]},
    empty_cache=lambda device=None: calls.append(("empty_cache", device)),
    set_per_process_memory_fraction=lambda fraction, device=None: calls.append(("fraction", fraction)),
    get_per_process_memory_fraction=lambda device=None: 0.5,
    record_stream=lambda tensor, stream: calls.append(("vram", stream)),
    attach_out_of_memory_observer=lambda fn: calls.append(("oom observer", fn)),
    set_allocator_settings=lambda env: calls.append(("vram settings", env)),
    caching_allocator_enable=lambda value=True: calls.append(("caching", value)),
    caching_allocator_enabled=lambda device=None: True,
    record_memory_history=lambda enabled, max_entries, device=None, context="all", stacks="python":
        calls.append(("history", enabled, max_entries, context, stacks)))

torch_routes.route(torch, vt)
for module in (cuda, memory):
    check(module.memory_allocated() == 7 and module.max_memory_allocated() == 9, "%s: allocated from vram" % module.__name__)
    check(module.memory_reserved() == 20 and module.max_memory_reserved() == 22, "%s: reserved from vram" % module.__name__)
    check(module.memory_stats()["allocated_bytes.all.current"] == 7, "%s: memory_stats from vram" % module.__name__)
    check(module.memory_summary() == "vram summary", "%s: memory_summary from vram" % module.__name__)
    check(module.memory_snapshot() == ["seg"], "%s: memory_snapshot is vram's segments" % module.__name__)
    check(not hasattr(module, "memory_cached"), "%s: a name this PyTorch lacks is not added" % module.__name__)
nested = cuda.memory_stats_as_nested_dict()
check(nested["allocated_bytes"]["all"] == {"current": 7, "peak": 9} and nested["num_alloc_retries"] == 1
      and nested["tags"]["other"]["allocated_bytes"]["current"] == 7, "nested dict from the flat keys: %s" % nested)
check(memory._snapshot()["segments"] == ["seg"], "torch.cuda.memory._snapshot is vram's snapshot")
cuda.empty_cache()
cuda.reset_peak_memory_stats()
cuda.set_per_process_memory_fraction(0.5)
check(cuda.get_per_process_memory_fraction() == 0.5 and memory.get_per_process_memory_fraction() == 0.5,
      "get_per_process_memory_fraction from vram")
check(calls == [("empty_cache", None), "reset_peak", ("fraction", 0.5)], "cache, peaks, fraction go to vram: %s" % calls)
calls.clear()
memory._record_memory_history(max_entries=1000)
memory._record_memory_history(enabled=None)
memory._record_memory_history()
memory._record_memory_history(context="alloc", stacks="python")
check(calls == [("history", "all", 1000, "all", "all"), ("history", None, sys.maxsize, "all", "all"),
                ("history", "all", sys.maxsize, "all", "all"), ("history", "all", sys.maxsize, "alloc", "python")],
      "_record_memory_history goes to vram's history, with its context and stacks: %s" % calls)
calls.clear()
memory._record_memory_history(True, trace_alloc_max_entries=5000, trace_alloc_record_context=True)
memory._record_memory_history(True, True, 100)  # the legacy form's arguments by position
memory._record_memory_history(True, record_context=False, trace_alloc_max_entries=10)
memory._record_memory_history(False)
check(calls == [("history", "all", 5000, "alloc", "python"), ("history", "all", 100, "state", "python"),
                ("history", "all", 10, None, "python"), ("history", None, 1, "state", "python")],
      "the legacy _record_memory_history(bool, ...) maps its arguments: %s" % calls)
calls.clear()
memory._set_allocator_settings("expandable_segments:False")
memory._set_allocator_settings("pinned_use_cuda_host_register:True")
check(calls == [("vram settings", "expandable_segments:False"), ("vram settings", "pinned_use_cuda_host_register:True"),
                ("torch settings", "pinned_use_cuda_host_register:True")],
      "_set_allocator_settings: vram's allocators first (a bad string raises there), PyTorch's own only for its "
      "pinned host allocator's options: %s" % calls)
# torch.accelerator's memory functions go through these torch._C calls (the one this "PyTorch" lacks
# stays absent); a negative index is PyTorch's "the current device"
calls.clear()
check(torch._C._accelerator_isAllocatorInitialized() is True, "accelerator: vram's allocator counts as initialized")
check(torch._C._accelerator_getDeviceStats(-1)["allocated_bytes"]["all"]["peak"] == 9,
      "accelerator: device stats are vram's, nested as PyTorch's C call returns them")
torch._C._accelerator_emptyCache()
torch._C._accelerator_resetPeakStats(-1)
torch._C._accelerator_resetPeakStats(0)
check(calls == [("empty_cache", None), "reset_peak", ("reset_peak", 0)],
      "accelerator: empty_cache and resets go to vram (-1: the current device): %s" % calls)
check(not hasattr(torch._C, "_accelerator_resetAccumulatedStats"), "a call this PyTorch lacks is not added")
calls.clear()
torch._C._cuda_cudaCachingAllocator_enable(False)
check(calls == [("caching", False)] and torch._C._cuda_cudaCachingAllocator_is_enabled() is True,
      "caching_allocator_enable goes to vram, and the query later PyTorch's caching_allocator_disabled() makes "
      "is answered: %s" % calls)
calls.clear()
torch._C._cuda_attach_out_of_memory_observer(print)
check(calls == [("oom observer", print)], "torch._C._cuda_attach_out_of_memory_observer goes to vram: %s" % calls)
calls.clear()
Tensor(True).record_stream("s1")
Tensor(False).record_stream("s2")
check(calls == [("vram", "s1"), ("torch", "s2")], "record_stream: CUDA tensors to vram, others to torch: %s" % calls)
check(torch_routes.ORIGINALS[("torch.cuda", "memory_allocated")]() == "torch:memory_allocated", "originals kept")
before = cuda.memory_allocated
torch_routes.route(torch, vt)
check(cuda.memory_allocated is before and torch_routes.ORIGINALS[("torch.cuda.memory", "memory_stats")]() == "torch:memory_stats",
      "a second route() changes nothing")
# PyTorch 2.11: torch.cuda.memory._set_allocator_settings calls torch._C._accelerator_setAllocatorSettings,
# which is what gets routed (the Python function stays PyTorch's, so vram is not asked twice).
torch._C._accelerator_setAllocatorSettings = lambda env: calls.append(("torch C settings", env))
python_settings = lambda env: torch._C._accelerator_setAllocatorSettings(env)  # noqa: E731
memory._set_allocator_settings = python_settings
torch_routes.ORIGINALS.clear()
torch_routes.route(torch, vt)
calls.clear()
memory._set_allocator_settings("garbage_collection_threshold:0.5")
memory._set_allocator_settings("pinned_num_register_threads:8")
check(memory._set_allocator_settings is python_settings and calls == [
    ("vram settings", "garbage_collection_threshold:0.5"), ("vram settings", "pinned_num_register_threads:8"),
    ("torch C settings", "pinned_num_register_threads:8")],
      "with torch._C._accelerator_setAllocatorSettings, that is routed: %s" % calls)
sys.exit(done("test_torch_routes"))

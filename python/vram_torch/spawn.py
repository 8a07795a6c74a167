"""spawn.py — worker processes a program starts with torch.multiprocessing run under vram too.

An allocator is chosen per process: vram_torch.enable() in a program (or `python -m vram_torch
run`) makes vram the allocator of that process only. A DistributedDataParallel script that starts
its workers itself, with torch.multiprocessing.spawn (or start_processes), gets fresh interpreters
("spawn" start method) in which nothing enabled vram: they would run on PyTorch's own allocator,
silently. install(torch), which enable() calls, wraps PyTorch's start_processes (which spawn
calls) so that each worker's function comes wrapped in EnableThen: unpickled in the worker (by
reference, like the function itself), it enables vram there, routing torch.cuda's functions where
this process routes them, and then calls the function. A worker that cannot take vram (CUDA
already used by the script's top level, which the worker runs again on import) says so in a
warning and runs on PyTorch's allocator, as it would have without vram. Workers started by
torchrun are separate programs: launched as `torchrun -m vram_torch run script.py`, each enables
vram itself.
"""
import functools
import sys
import warnings

ORIGINALS = {}


class EnableThen:
    """A spawned worker's function: enables vram in the worker, then calls fn."""

    def __init__(self, fn, route_torch):
        self.fn, self.route_torch = fn, route_torch

    def __call__(self, *args, **kwargs):
        import vram_torch
        try:
            vram_torch.enable(route_torch=self.route_torch)
        except (RuntimeError, ValueError) as e:
            warnings.warn("vram_torch: this worker runs on PyTorch's allocator: %s" % e, RuntimeWarning)
        return self.fn(*args, **kwargs)


def install(torch):
    """Wraps torch.multiprocessing's start_processes (module and package bindings) once. Workers
    route torch.cuda's functions to vram where this process does when it starts them."""
    try:
        import torch.multiprocessing  # noqa: F401 (imports its spawn module)
    except ImportError:
        return
    module = sys.modules.get("torch.multiprocessing.spawn")
    package = getattr(torch, "multiprocessing", None)
    original = getattr(module, "start_processes", None)
    if ORIGINALS or original is None:
        return

    @functools.wraps(original)
    def start_processes(fn, *args, **kwargs):
        from . import torch_routes
        if not isinstance(fn, EnableThen):
            fn = EnableThen(fn, route_torch=bool(torch_routes.ORIGINALS))
        return original(fn, *args, **kwargs)

    ORIGINALS["start_processes"] = original
    module.start_processes = start_processes  # what torch.multiprocessing.spawn() calls
    if getattr(package, "start_processes", None) is original:
        package.start_processes = start_processes

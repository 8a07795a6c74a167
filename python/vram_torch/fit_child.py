"""fit_child.py — one real run of a program for `python -m vram_torch fit -- train.py ...`
(fit_run.py starts it as `python -m vram_torch _fit_child ...`, one process a run).

    python -m vram_torch _fit_child --steps K --result R.json [--trace T.trace]
                                    [--allocator vram|native|expandable] [--capacity BYTES] -- script args...

The program runs unchanged until its K-th optimizer step ends (a global optimizer step post-hook
counts them); the process then writes R.json and leaves at once (os._exit: a training loop
need not end by itself). R.json: {"steps", "peak_allocated", "peak_reserved", "oom", "error",
"ended"}. With --trace, the allocations up to that moment, recorded under PyTorch's own
allocator, are written as memtrace v1 (record.py's converter), and T.trace.sites the Python
stack's name of each allocation (fit_align.py). --allocator: vram
(vram_torch.enable()), native, or expandable (PyTorch's expandable segments; fit_run.py sets
PYTORCH_CUDA_ALLOC_CONF for it before this process starts). --capacity limits the allocator's
reserved memory, as a GPU of that size would (set_per_process_memory_fraction).
"""
import argparse
import json
import os
import sys


def main(argv):
    p = argparse.ArgumentParser(prog="python -m vram_torch _fit_child")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--result", required=True)
    p.add_argument("--trace")
    p.add_argument("--allocator", default="native", choices=["vram", "native", "expandable"])
    p.add_argument("--capacity", type=int, default=0)
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    from .__main__ import _parse
    a = _parse(p, argv, ("--steps", "--result", "--trace", "--allocator", "--capacity"))
    from .launch import require_torch, run_script
    torch = require_torch("fit")
    result = {"steps": 0, "oom": False, "error": None, "ended": False}
    mem = torch.cuda
    if a.allocator == "vram":
        import vram_torch
        vram_torch.enable()
        mem = vram_torch
    if a.trace:
        # (context "alloc": each allocation's Python stack, its site for fit_align.py)
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=5_000_000)
    if a.capacity:
        total = torch.cuda.mem_get_info()[1]
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.capacity / total))

    def finish():
        try:
            torch.cuda.synchronize()
        except Exception:
            pass
        result["peak_allocated"] = mem.max_memory_allocated()
        result["peak_reserved"] = mem.max_memory_reserved()
        if a.trace:
            from .record import convert
            snap = torch.cuda.memory._snapshot()
            traces = snap.get("device_traces", [])
            dev = torch.cuda.current_device()
            entries = traces[dev] if dev < len(traces) else []
            with open(a.trace, "w") as f:
                convert(entries, f, {"source": "vram_torch fit, %d steps of %s" % (result["steps"],
                                                                                   " ".join([a.script] + a.args))})
            from .fit_align import site_of
            with open(a.trace + ".sites", "w") as f:  # in the order convert numbers the allocations
                json.dump([site_of(e.get("frames")) for e in entries if e.get("action") == "alloc"], f)
        with open(a.result, "w") as f:
            json.dump(result, f)

    def post_step(opt, args, kwargs):
        result["steps"] += 1
        if result["steps"] >= a.steps:
            finish()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    from torch.optim import optimizer as optim_module
    optim_module.register_optimizer_step_post_hook(post_step)
    try:
        status = run_script([a.script] + a.args)
        result["ended"] = True
        if status:
            result["error"] = "exited with status %s" % status
    except torch.OutOfMemoryError as e:
        result["oom"] = True
        result["error"] = str(e).splitlines()[0][:300]
    except BaseException as e:  # the program's own failure: fit_run.py says it
        result["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
    finish()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

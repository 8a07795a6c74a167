"""fit_run.py — the largest batch that fits, found by running the program itself at most three
times and replaying the rest.

    python -m vram_torch fit --capacity 40GiB [--allocator vram|native|expandable] [--steps 3]
                             [--batches 2,4] [--max-batch N] [--compare] [--json] [--keep DIR]
                             [--elastic-workspaces]
                             -- train.py --batch-size {batch}

1. Two real runs at small batches (--batches), each stopped when its --steps-th optimizer step
   ends, recording the program's allocation stream (fit_child.py, PyTorch's own allocator: the
   stream is the program's requests, whatever allocator serves them).
2. fit.py learns how each allocation scales with the batch (lenient: library workspaces that do
   not follow the batch are taken at their largest), synthesizes the stream at any batch and
   searches the largest batch whose replay through vram's allocator on a simulated CUDA device
   of the capacity has no out-of-memory error: vram's own placement for --allocator vram, its
   segments model (PyTorch's native placement) for native, its pages that only grow
   (reserve_slack:0.99, as PyTorch's expandable segments grow) for expandable.
3. One real run at that batch under that allocator, limited to the capacity, confirms it.
--compare also searches the other two allocators' batches (replays only, no more real runs).
--elastic-workspaces: a workspace (an allocation freed by the next event, as cuDNN's convolutions
make them) whose allocation fails in a replay is replayed as given up (fit.search), as PyTorch's
cuDNN code gives up a workspace it cannot get and tries plans that need less.
Status: 0 the batch is found and confirmed; 1 batch 1 does not fit, the confirming run ran out
of memory, or the program failed; 2 bad input (no {batch} in the arguments, no script, a program
that makes no optimizer step).
"""
import json
import os
import subprocess
import sys
import tempfile

from .fit import FitError, find_vram, learn, load_trace, parse_size, search

CONF = {"vram": None, "native": "expandable_segments:False", "expandable": "expandable_segments:True,reserve_slack:0.99"}


class RunFailed(Exception):
    """A real run that did not give what fit needs; the message says why."""


def child_command(script_args, batch, steps, result, trace=None, allocator="native", capacity=0):
    args = [x.replace("{batch}", str(batch)) for x in script_args]
    cmd = [sys.executable, "-m", "vram_torch", "_fit_child", "--steps", str(steps), "--result", result,
           "--allocator", allocator]
    if trace:
        cmd += ["--trace", trace]
    if capacity:
        cmd += ["--capacity", str(capacity)]
    return cmd + ["--"] + args


def real_run(script_args, batch, steps, folder, trace=False, allocator="native", capacity=0):
    """One run of the program: its result dict (fit_child.py), the trace's path in "trace"."""
    result = os.path.join(folder, "b%d_%s.json" % (batch, allocator))
    tpath = os.path.join(folder, "b%d.trace" % batch) if trace else None
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if allocator == "expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    else:
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    p = subprocess.run(child_command(script_args, batch, steps, result, tpath, allocator, capacity), env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not os.path.exists(result):
        tail = "\n".join(p.stderr.strip().splitlines()[-6:])
        raise RunFailed("the program failed at batch %d before fit could read it (status %d):\n%s"
                        % (batch, p.returncode, tail))
    with open(result) as f:
        r = json.load(f)
    r["stderr_tail"] = "\n".join(p.stderr.strip().splitlines()[-6:])
    r["trace"] = tpath
    return r


def check_recording(r, batch, steps):
    if r["oom"]:
        raise RunFailed("the run at batch %d ran out of memory on this GPU before its step %d: give smaller "
                        "--batches" % (batch, r["steps"] + 1))
    if r["steps"] == 0:
        if r["error"]:
            raise RunFailed("the program failed before its first optimizer step at batch %d (%s)%s"
                            % (batch, r["error"], "\n" + r["stderr_tail"] if r["stderr_tail"] else ""))
        raise FitError("the program made no optimizer step (an inference program?): fit finds the batch of "
                       "a training step")
    if r["steps"] < steps:
        raise RunFailed("the program ended after %d optimizer step(s) at batch %d, before the %d asked (--steps)%s"
                        % (r["steps"], batch, steps, " (%s)" % r["error"] if r["error"] else ""))


def fit_program(script_args, capacity, allocator="vram", steps=3, batches=(2, 4), max_batch=1 << 16, vram=None,
                device="cudasim", confirm=True, folder=None, compare=False, elastic=False):
    """The whole procedure; a dict with batch, predicted and measured peaks, runs and replays."""
    if not any("{batch}" in x for x in script_args):
        raise FitError("no {batch} in the program's arguments (e.g. -- train.py --batch-size {batch})")
    if not script_args or not os.path.exists(script_args[0]):
        raise FitError("no such script: %s" % (script_args[0] if script_args else "(none given)"))
    exe = find_vram(vram)
    own = folder is None
    folder = folder or tempfile.mkdtemp(prefix="vram_fit_")
    runs = []
    try:
        traces, sites = {}, {}
        for b in batches:
            r = real_run(script_args, b, steps, folder, trace=True)
            runs.append({"batch": b, "kind": "record", "peak_allocated": r.get("peak_allocated"),
                         "peak_reserved": r.get("peak_reserved")})
            check_recording(r, b, steps)
            traces[b] = load_trace(r["trace"])
            if os.path.exists(r["trace"] + ".sites"):
                with open(r["trace"] + ".sites") as f:
                    sites[b] = json.load(f)
        model = learn(traces, lenient=True, sites=sites if len(sites) == len(traces) else None)
        batch, res, replays = search(model, capacity, exe, device, max_batch, CONF[allocator], elastic)
        out = {"capacity": capacity, "allocator": allocator, "steps": steps, "batch": batch, "replays": replays,
               "predicted_peak_reserved": res.get("peak_reserved_bytes"), "runs": runs, "by_allocator": {},
               "elastic_workspaces": elastic, "workspaces_dropped": res.get("workspaces_dropped", 0)}
        for other in sorted(CONF) if compare else ():  # replays only: which allocator fits the larger batch
            b, r, n = (batch, res, 0) if other == allocator else search(model, capacity, exe, device, max_batch,
                                                                         CONF[other], elastic)
            out["by_allocator"][other] = {"batch": b, "predicted_peak_reserved": r.get("peak_reserved_bytes")}
            out["replays"] += n
        if batch and confirm:
            r = real_run(script_args, batch, steps, folder, allocator=allocator, capacity=capacity)
            runs.append({"batch": batch, "kind": "confirm", "peak_allocated": r.get("peak_allocated"),
                         "peak_reserved": r.get("peak_reserved"), "oom": r["oom"]})
            out["confirmed"] = not r["oom"] and r["steps"] >= steps
            out["measured_peak_reserved"] = r.get("peak_reserved")
            if r["error"] and not r["oom"]:
                out["confirm_error"] = r["error"]
        out["real_runs"] = len(runs)
        return out
    finally:
        if own:
            for name in os.listdir(folder):
                os.remove(os.path.join(folder, name))
            os.rmdir(folder)


def main(argv):
    import argparse
    if "--" not in argv:
        print("vram_torch fit: put the program after --: fit --capacity 40GiB -- train.py --batch-size {batch}",
              file=sys.stderr)
        return 2
    i = argv.index("--")
    own, script_args = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="python -m vram_torch fit")
    p.add_argument("--capacity", required=True)
    p.add_argument("--allocator", default="vram", choices=sorted(CONF))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batches", default="2,4")
    p.add_argument("--max-batch", type=int, default=1 << 16)
    p.add_argument("--vram")
    p.add_argument("--device", default="cudasim")
    p.add_argument("--no-confirm", action="store_true")
    p.add_argument("--compare", action="store_true", help="also the batch each other allocator would fit (replays)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--keep", metavar="DIR", help="keep the runs' traces and results in DIR (made if missing)")
    p.add_argument("--elastic-workspaces", action="store_true",
                   help="a workspace freed right after it is made (cuDNN's) may be given up under the cap")
    a = p.parse_args(own)
    try:
        capacity = parse_size(a.capacity)
        batches = sorted({int(x) for x in a.batches.split(",") if x.strip()})
        if len(batches) < 2 or batches[0] < 1:
            raise FitError("--batches needs two or three batch sizes of at least 1, e.g. 2,4")
        if a.steps < 1:
            raise FitError("--steps must be at least 1")
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
        out = fit_program(script_args, capacity, a.allocator, a.steps, batches, a.max_batch, a.vram, a.device,
                          not a.no_confirm, folder=a.keep, compare=a.compare, elastic=a.elastic_workspaces)
    except (FitError, ValueError) as e:
        print("vram_torch fit: %s" % e, file=sys.stderr)
        return 2
    except RunFailed as e:
        print("vram_torch fit: %s" % e, file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(out))
    if not out["batch"]:
        print("vram_torch fit: batch 1 does not fit in %d bytes under %s (replayed)" % (capacity, a.allocator),
              file=sys.stderr)
        return 1
    if not a.json:
        print("largest batch that fits in %.2f GiB under %s: %d (predicted peak reserved %.2f GiB; %d real runs, "
              "%d replays)" % (capacity / 2 ** 30, a.allocator, out["batch"], out["predicted_peak_reserved"] / 2 ** 30,
                               out["real_runs"], out["replays"]))
        for other, r in out["by_allocator"].items():
            print("  under %-10s batch %d (predicted peak reserved %.2f GiB)" % (
                other, r["batch"], (r["predicted_peak_reserved"] or 0) / 2 ** 30))
        if "measured_peak_reserved" in out:
            print("confirmed by a run at batch %d: %s, peak reserved %.2f GiB" % (
                out["batch"], "fits" if out["confirmed"] else "FAILED", (out["measured_peak_reserved"] or 0) / 2 ** 30))
    if out.get("confirmed") is False:
        print("vram_torch fit: the confirming run at batch %d %s" % (
            out["batch"], "ran out of memory" if any(r.get("oom") for r in out["runs"]) else
            "failed: %s" % out.get("confirm_error")), file=sys.stderr)
        return 1
    return 0

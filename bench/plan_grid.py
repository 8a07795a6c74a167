#!/usr/bin/env python3
"""plan_grid.py — `vram plan` against real `vram train` runs: predicted and measured peak memory.

For each configuration of a grid (model size, batch, optimizer, checkpointing, accumulation,
threads) it runs `vram train --steps S` on the CPU and reads the peak allocated and peak reserved
bytes it reports (the allocator's statistics), and runs `vram plan` with the same flags, twice:
`--steps S` (the same run, planned) and without (until the allocator settles: the figure for any
run long enough). Then the remedies: a `vram train` that runs out of memory under --capacity
prints each remedy's planned peak; each remedy that fits is run for real under that capacity.

    python3 bench/plan_grid.py --vram build/vram --data build/data/kjv.txt [--quick] [--check]
                               [--markdown OUT.md]

--quick runs a small subset (CTest: tests/plan_check.py); --check exits 1 when a prediction is off
by more than the bounds (3% of measured peak reserved, under by more than 2%; remedies 10%).

--device cuda (on a GPU machine; bench/run_torchplan_gpu.sh's part `grid`): the GPU grid instead,
`vram train --device cuda:0` against `vram plan --device cuda` (model size, context, batch,
optimizer, accumulation, checkpointing, --recompute, fp32/bf16/fp16, --lowp-weights), --steps each, one run a
configuration, and the GPU runtime's remedies; --json writes the rows, which
tests/plan_gpu_check.py reads back (the GPU runs' figures, re-planned on any machine).
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

MIB = 1024.0 * 1024.0

# (name, flags): sizes x batch x optimizer x checkpointing x accumulation (x threads)
SIZES = {
    "2x64": ["--layers", "2", "--heads", "2", "--width", "64", "--context", "32"],
    "4x128": ["--layers", "4", "--heads", "4", "--width", "128", "--context", "64"],
    "6x192": ["--layers", "6", "--heads", "6", "--width", "192", "--context", "64"],
    "4x256": ["--layers", "4", "--heads", "8", "--width", "256", "--context", "128"],
}


def full_grid():
    grid = []
    for size in SIZES:
        for batch, opt, ckpt, accum in [(8, "adamw", False, 1), (24, "adamw", False, 1), (16, "sgd", False, 1),
                                        (16, "adagrad", True, 1), (8, "momentum", False, 3), (32, "adam", True, 2),
                                        (4, "adamw", False, 1)]:
            grid.append((size, batch, opt, ckpt, accum, 1))
    # two threads: the matrix product's per-thread pack buffers
    grid += [("4x128", 16, "adamw", False, 1, 2), ("6x192", 24, "sgd", True, 1, 2), ("4x256", 8, "adamw", False, 2, 2)]
    return grid


# (size flags, batch, optimizer, accumulation, other flags): --device cuda
GPU_SIZES = {
    "gpt2": ["--model", "gpt2"],
    "gpt2-512": ["--model", "gpt2", "--context", "512"],
    "6x384": ["--model", "gpt:6x384", "--heads", "6", "--context", "256"],
    "medium-512": ["--model", "gpt2-medium", "--context", "512"],
}


def gpu_grid():
    fp32, bf16, fp16 = ["--precision", "fp32"], ["--precision", "bf16"], ["--precision", "fp16"]
    g = [("gpt2", 8, "adamw", 1, fp32), ("gpt2", 4, "sgd", 1, fp32), ("gpt2", 8, "adagrad", 1, fp32 + ["--checkpoint"]),
         ("gpt2", 4, "momentum", 2, fp32),
         ("gpt2", 8, "adamw", 1, bf16), ("gpt2", 16, "adamw", 1, bf16), ("gpt2", 8, "adam", 1, bf16 + ["--checkpoint"]),
         ("gpt2", 8, "sgd", 1, bf16 + ["--recompute", "none"]), ("gpt2", 8, "adamw", 1, bf16 + ["--recompute", "gelu"]),
         ("gpt2", 4, "adamw", 2, bf16), ("gpt2", 8, "adamw", 1, fp16), ("gpt2", 8, "sgd", 1, fp16 + ["--checkpoint"]),
         ("gpt2-512", 8, "adamw", 1, fp32), ("gpt2-512", 16, "sgd", 1, fp32 + ["--checkpoint"]),
         ("gpt2-512", 16, "adamw", 1, bf16), ("gpt2-512", 32, "adamw", 1, bf16 + ["--checkpoint"]),
         ("gpt2-512", 16, "momentum", 1, bf16 + ["--recompute", "layernorm"]), ("gpt2-512", 8, "adagrad", 3, bf16),
         ("6x384", 16, "adamw", 1, fp32), ("6x384", 32, "adam", 1, fp32), ("6x384", 64, "sgd", 1, fp32 + ["--checkpoint"]),
         ("6x384", 32, "adamw", 1, bf16), ("6x384", 64, "adamw", 1, bf16 + ["--recompute", "none"]),
         ("6x384", 32, "adagrad", 1, fp16),
         ("medium-512", 4, "adamw", 1, bf16), ("medium-512", 8, "adamw", 1, bf16 + ["--checkpoint"]),
         ("medium-512", 2, "adamw", 1, fp32),
         ("gpt2", 8, "adamw", 1, bf16 + ["--lowp-weights", "keep"]),
         ("gpt2-512", 16, "adamw", 1, fp16 + ["--lowp-weights", "keep"])]
    return [GPU_SIZES[size] + ["--batch", str(b), "--optimizer", opt, "--accum", str(acc)] + extra
            for size, b, opt, acc, extra in g]


def records_head(steps):
    """What the GPU records say of the runtime that made them, for tests/plan_gpu_check.py to plan
    them the same way: the steps, the allocator's options and VRAM_GRAD_ADOPT (on unless "0")."""
    return {"steps": steps, "alloc_conf": os.environ.get("VRAM_ALLOC_CONF", ""),
            "grad_adopt": 0 if os.environ.get("VRAM_GRAD_ADOPT") == "0" else 1}


def gpu_rows(vram, data, grid, steps, path=None, done=(), jobs=1):
    """Each configuration trained on GPU 0 and planned for the GPU runtime (no GPU used by the plan);
    a configuration that fails is a row with its error (the check counts it as a miss). With path,
    the rows so far are written there after each (kept should the run be cut short). done: rows
    measured by an earlier run at the same steps (--resume), kept and planned again, not rerun.
    jobs: trainings run at once (each process has its own allocator: its peaks are its own)."""
    rows, earlier = [], {r["flags"]: r for r in done if "measured_reserved" in r}
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    runs = {" ".join(f): pool.submit(measure, vram, data, ["--device", "cuda:0"] + f, steps)
            for f in grid if " ".join(f) not in earlier}
    for flags in grid:
        row = {"flags": " ".join(flags), "steps": steps}
        try:
            if row["flags"] in earlier:
                r = earlier[row["flags"]]
                m_alloc, m_res, row["train_s"] = r["measured_allocated"], r["measured_reserved"], r.get("train_s")
                row["from"] = "earlier run"
            else:
                m_alloc, m_res, row["train_s"] = runs[row["flags"]].result()
            got = plan(vram, ["--device", "cuda"] + flags, steps=steps)
            row.update(measured_allocated=m_alloc, measured_reserved=m_res, planned_allocated=mib2(got["peak_allocated"]),
                       planned_reserved=mib2(got["peak_reserved"]))
            row["error"] = row["planned_reserved"] / m_res - 1
        except RuntimeError as e:
            row["failed"] = str(e)[-600:]
        print(json.dumps(row), flush=True)
        rows.append(row)
        if path:
            with open(path, "w") as f:
                json.dump(dict(records_head(steps), rows=rows, remedies=[]), f, indent=1)
    return rows


def quick_grid():
    return [("2x64", 8, "adamw", False, 1, 1), ("2x64", 16, "sgd", True, 1, 1), ("2x64", 4, "adagrad", False, 3, 1),
            ("2x64", 8, "momentum", True, 2, 2)]


def flags_of(size, batch, opt, ckpt, accum, threads):
    f = SIZES[size] + ["--batch", str(batch), "--optimizer", opt, "--accum", str(accum), "--threads", str(threads)]
    return f + (["--checkpoint"] if ckpt else [])


def run(cmd):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


SUMMARY = re.compile(r"peak allocated ([0-9.]+) MiB, peak reserved ([0-9.]+) MiB")


def measure(vram, data, flags, steps, capacity=None):
    """Peak allocated and reserved (MiB, as vram train prints them) of a real run, and its seconds."""
    cmd = [vram, "train", "--data", data, "--steps", str(steps)] + flags
    if capacity:
        cmd += ["--capacity", capacity]
    rc, out, err, secs = run(cmd)
    m = SUMMARY.search(out)
    if rc != 0 or not m:
        raise RuntimeError("vram train %s: status %d\n%s%s" % (" ".join(flags), rc, out[-2000:], err[-2000:]))
    return float(m.group(1)), float(m.group(2)), secs


def plan(vram, flags, steps=None, capacity=None):
    cmd = [vram, "plan", "--json"] + flags + (["--steps", str(steps)] if steps else [])
    if capacity:
        cmd += ["--capacity", capacity]
    rc, out, err, secs = run(cmd)
    if rc != 0:
        raise RuntimeError("vram plan %s: status %d\n%s%s" % (" ".join(flags), rc, out, err))
    return json.loads(out)


def mib2(b):
    """Bytes as vram train prints them: MiB with two decimals."""
    return round(b / MIB, 2)


def grid_rows(vram, data, grid, steps):
    rows = []
    for cfg in grid:
        flags = flags_of(*cfg)
        m_alloc, m_res, t_train = measure(vram, data, flags, steps)
        same = plan(vram, flags, steps=steps)
        settled = plan(vram, flags)
        # the planner's own time: the median of 5 plans (the allocator's bookkeeping only)
        plan_s = sorted(plan(vram, flags)["seconds"] for _ in range(5))[2]
        rows.append({
            "config": cfg, "flags": " ".join(flags), "measured_allocated": m_alloc, "measured_reserved": m_res,
            "planned_allocated": mib2(same["peak_allocated"]), "planned_reserved": mib2(same["peak_reserved"]),
            "settled_reserved": mib2(settled["peak_reserved"]), "steady_from": settled["steady_from"],
            "error": mib2(same["peak_reserved"]) / m_res - 1, "train_s": t_train, "plan_s": plan_s,
        })
    return rows


REMEDY = re.compile(r"^  (\S.*?)\s{2,}(--\S.*?)\s{2,}([0-9.]+) MiB\s+(yes|no)$")


def remedy_rows(vram, data, base, capacity, steps):
    """Runs `base` under `capacity` (it must run out of memory), reads the planned remedies from its
    report and runs each one that fits for real under the same capacity."""
    cmd = [vram, "train", "--data", data, "--steps", str(steps), "--capacity", capacity] + base
    rc, out, err, _ = run(cmd)
    if rc != 1 or "what would fit" not in err:
        raise RuntimeError("expected an out-of-memory run with remedies: status %d\n%s" % (rc, err[-3000:]))
    rows = []
    for line in err.splitlines():
        m = REMEDY.match(line)
        if not m:
            continue
        name, rflags, predicted, fits = m.group(1).strip(), m.group(2).split(), float(m.group(3)), m.group(4)
        row = {"remedy": name, "flags": " ".join(rflags), "predicted": predicted, "fits": fits == "yes"}
        if row["fits"]:
            merged = merge_flags(base, rflags)
            _, m_res, _ = measure(vram, data, merged, steps, capacity)
            row["measured"] = m_res
            row["error"] = predicted / m_res - 1
        rows.append(row)
    return rows


def merge_flags(base, extra):
    """base with extra's flags replacing or added (--checkpoint is a switch)."""
    out, i = [], 0
    names = {f for f in extra if f.startswith("--")}
    while i < len(base):
        f = base[i]
        if f in names:
            i += 1 if f == "--checkpoint" else 2
            continue
        out.append(f)
        i += 1
    return out + extra


def check(rows, remedies):
    bad = []
    for r in rows:
        if "failed" in r:
            bad.append("%s: no figure (%s)" % (r["flags"], r["failed"].strip().splitlines()[-1:]))
        elif abs(r["error"]) > 0.03 or r["error"] < -0.02:
            bad.append("%s: planned %.2f MiB, measured %.2f MiB" % (r["flags"], r["planned_reserved"], r["measured_reserved"]))
    for r in remedies:
        if "error" in r and abs(r["error"]) > 0.10:
            bad.append("remedy %s: planned %.2f MiB, measured %.2f MiB" % (r["remedy"], r["predicted"], r["measured"]))
    return bad


def markdown(rows, remedies, steps, argv):
    lines = ["| config (flags) | measured alloc | planned alloc | measured reserved | planned reserved | error | "
             "settled (from step) | train s (1 run) | plan s (median of 5) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| `%s` | %.2f | %.2f | %.2f | %.2f | %+.2f%% | %.2f (%d) | %.1f | %.4f |" % (
            r["flags"], r["measured_allocated"], r["planned_allocated"], r["measured_reserved"], r["planned_reserved"],
            100 * r["error"], r["settled_reserved"], r["steady_from"], r["train_s"], r["plan_s"]))
    lines += ["", "| remedy | flags | planned peak reserved (MiB) | fits | measured (MiB) | error |", "|---|---|---:|---|---:|---:|"]
    for r in remedies:
        lines.append("| %s | `%s` | %.2f | %s | %s | %s |" % (
            r["remedy"], r["flags"], r["predicted"], "yes" if r["fits"] else "no",
            "%.2f" % r["measured"] if "measured" in r else "-", "%+.2f%%" % (100 * r["error"]) if "error" in r else "-"))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vram", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--markdown")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--json", help="write the rows (and remedies) as JSON here")
    ap.add_argument("--resume", help="--device cuda: a JSON of an earlier run whose measured rows are kept")
    ap.add_argument("--jobs", type=int, default=1, help="--device cuda: trainings at once (default 1)")
    a = ap.parse_args()
    if a.device == "cuda":
        return gpu_main(a)
    grid = quick_grid() if a.quick else full_grid()
    print("machine: %s, %s, %d CPUs" % (platform.node(), platform.processor() or platform.machine(), os.cpu_count()))
    print("command: %s" % " ".join(sys.argv))
    rows = grid_rows(a.vram, a.data, grid, a.steps)
    # an out-of-memory run whose remedies fit below the capacity (not only by releasing the cache)
    if a.quick:
        base, cap = SIZES["2x64"] + ["--batch", "96", "--threads", "1"], "24MiB"
    else:
        base, cap = SIZES["4x128"] + ["--batch", "48", "--threads", "1"], "64MiB"
    remedies = remedy_rows(a.vram, a.data, base, cap, 8)
    table = markdown(rows, remedies, a.steps, sys.argv)
    print(table)
    errs = [abs(r["error"]) for r in rows]
    print("\n%d configurations: largest |error| %.3f%%, mean %.3f%%; remedies measured: %d" % (
        len(rows), 100 * max(errs), 100 * sum(errs) / len(errs), sum(1 for r in remedies if "measured" in r)))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table + "\n")
    bad = check(rows, remedies)
    for b in bad:
        print("OUT OF BOUNDS: " + b)
    if a.check and (bad or not any("measured" in r for r in remedies)):
        return 1
    return 0


def gpu_main(a):
    print("machine: %s, %d CPUs; command: %s" % (platform.node(), os.cpu_count(), " ".join(sys.argv)), flush=True)
    done = []
    if a.resume:
        with open(a.resume) as f:
            earlier = json.load(f)
        if earlier.get("steps") != a.steps:
            raise SystemExit("plan_grid.py: %s was measured at --steps %s, not %d" % (a.resume, earlier.get("steps"),
                                                                                    a.steps))
        if earlier.get("grad_adopt", 0) != records_head(a.steps)["grad_adopt"]:
            raise SystemExit("plan_grid.py: %s was measured with VRAM_GRAD_ADOPT=%s, not this run's" % (
                a.resume, earlier.get("grad_adopt", 0)))
        done = earlier["rows"]
    rows = gpu_rows(a.vram, a.data, gpu_grid(), a.steps, a.json, done, a.jobs)
    # the GPU runtime out of memory: GPT-2 bf16 at batch 16 in 4 GiB; the remedies that fit, run there
    try:
        remedies = remedy_rows(a.vram, a.data, ["--device", "cuda:0", "--model", "gpt2", "--precision", "bf16", "--batch",
                                                "16"], "4GiB", a.steps)
    except RuntimeError as e:
        remedies = [{"remedy": "(the out-of-memory run)", "flags": "", "predicted": 0, "fits": False,
                     "failed": str(e)[-600:]}]
    for r in remedies:
        print(json.dumps(r), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(records_head(a.steps), rows=rows, remedies=remedies), f, indent=1)
    ok = [r for r in rows if "error" in r]
    bad = check(rows, remedies)
    print("\n%d configurations, %d measured; reserved error %+.2f%% .. %+.2f%%; %d out of bounds" % (
        len(rows), len(ok), 100 * min((r["error"] for r in ok), default=0), 100 * max((r["error"] for r in ok), default=0),
        len(bad)))
    for b in bad:
        print("OUT OF BOUNDS: " + b)
    return 1 if a.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""placement_steady.py — what an allocator configuration holds and what it costs in driver calls
once a program is warm, replayed on the CPU (`vram replay --json`) over traces of
bench/placement_workloads.py's programs.

    python3 bench/placement_steady.py [--vram build/vram] [--device cudasim:lag=100]
                                      [--conf CONF]... TRACE...

For each trace and each configuration (the default configuration first, then every --conf):
peak reserved / peak requested over the whole replay, device calls (maps + unmaps) over the whole
replay, and device calls per step after the warm-up steps: the trace is cut where the warm-up
steps end and replayed again, and the difference is divided by the steps that follow. A step
begins at a `# sync: step` line (traces recorded by placement_workloads.py since 2026-12-06,
mid-morning); a trace without such lines is cut by its share of events (the workload's kind, from
its file name: ckpt 2 of 10 steps, gen 1 of 4, infer 1 of 6), an approximation the table says.
Driver calls after warm-up are what could cost step time on a GPU (40-350 us each); the first
steps' calls are paid once. Traces recorded before the recorder kept the blocks live at a
workload's start get them as placement_fidelity.py gives them (--live, default the H100's
cuBLAS workspaces), so that the figures are the GPU's.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from placement_fidelity import FIRST, fail, header, parse_size, read_text, with_live  # noqa: E402

STEPS = {"ckpt": (10, 2), "gen": (4, 1), "infer": (6, 1)}  # kind -> (steps, warm-up steps)


def read_lines(path, live):
    text = read_text(path)
    if live and os.path.basename(path).split(".")[0] != FIRST and "live_at_start_bytes" not in header(text):
        text = with_live(text, live)
    return text.splitlines(keepends=True)


def kind_of(path):
    name = os.path.basename(path)
    return name.split("_")[0] if name.split("_")[0] in STEPS else None


def warm_cut(lines, kind):
    """(line index where the warm-up steps end, steps after it, how the cut was found)."""
    marks = [i for i, l in enumerate(lines) if l.startswith("# sync: step")]
    steps, warm = STEPS.get(kind, (4, 1))
    if len(marks) > warm:
        return marks[warm], len(marks) - warm, "sync marks"
    events = [i for i, l in enumerate(lines) if l[:2] in ("a ", "f ")]
    if not events:
        return None, 0, "no events"
    return events[len(events) * warm // steps], steps - warm, "share of events"


def replay(vram, device, conf, path):
    cmd = [vram, "replay", "--json", "--device", device]
    if conf:
        cmd += ["--conf", conf]
    p = subprocess.run(cmd + [path], capture_output=True, text=True)
    if p.returncode != 0:
        fail("placement_steady.py: %s failed (%d): %s" % (" ".join(cmd + [path]), p.returncode,
                                                                       p.stderr.strip()[-400:]))
    return json.loads(p.stdout.strip().splitlines()[0])


def measure(vram, device, conf, path, cut_path, steps_after):
    """(ratio, device calls, device calls per step after the warm-up or None) of one replay."""
    whole = replay(vram, device, conf, path)
    calls = whole["device_allocs"] + whole["device_frees"]
    warm = replay(vram, device, conf, cut_path) if cut_path else None
    after = None
    if warm and steps_after:
        after = (calls - warm["device_allocs"] - warm["device_frees"]) / steps_after
    return whole["reserved_over_requested"], calls, after


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vram", default=os.path.join("build", "vram"))
    p.add_argument("--device", default="cudasim")
    p.add_argument("--conf", action="append", default=[])
    p.add_argument("--live", default="32MiB,32MiB,1MiB,1MiB", help="blocks before a workload after the first ('' none)")
    p.add_argument("traces", nargs="+")
    a = p.parse_args()
    if not os.access(a.vram, os.X_OK):
        fail("placement_steady.py: %s is not an executable (build vram, or pass --vram)" % a.vram)
    confs = [""] + a.conf
    live = [parse_size(x) for x in a.live.split(",") if x]
    print("# machine: %s, %s; %s" % (platform.processor() or platform.machine(), platform.platform(),
                                    time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    print("# command: %s" % " ".join(sys.argv))
    print("# device %s; cell: reserved / requested, device calls in all, per step after warm-up\n" % a.device)
    print("| trace | cut by | " + " | ".join(c or "default" for c in confs) + " |")
    print("|---|---|" + "---|" * len(confs))
    with tempfile.TemporaryDirectory() as tmp:
        for path in a.traces:
            lines = read_lines(path, live)
            cut, after, how = warm_cut(lines, kind_of(path))
            whole_path = os.path.join(tmp, "whole.trace")
            with open(whole_path, "w") as f:
                f.writelines(lines)
            cut_path = None
            if cut is not None:
                cut_path = os.path.join(tmp, "warm.trace")
                with open(cut_path, "w") as f:
                    f.writelines(lines[:cut])
            cells = []
            for conf in confs:
                ratio, calls, per_step = measure(a.vram, a.device, conf, whole_path, cut_path, after)
                cells.append("%.3f, %d, %s" % (ratio, calls, "-" if per_step is None else "%.1f" % per_step))
            print("| %s | %s | %s |" % (os.path.basename(path), how, " | ".join(cells)), flush=True)


if __name__ == "__main__":
    main()

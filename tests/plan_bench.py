"""plan_bench.py — what the step-plan tests on the H100 recordings share (test_step_plan_early.py,
test_step_plan_layers.py): the six programs' traces written as the GPU ran them, and
bench_step_plan's table read back as cells by trace.

    from plan_bench import NAMES, gpu_traces, table
    traces = gpu_traces(root, vram, tmpdir)      # DIR/NAME.trace for each of NAMES
    rows = table(bench_exe, ["--device", "cudasim"] + traces)   # {name: [cells]}
"""
import os
import subprocess
import sys

from pycheck import check

NAMES = ["ckpt_gpt2", "ckpt_llama", "gen_llama", "gen_gpt2", "infer_resnet50", "infer_convnext"]


def gpu_traces(root, vram, tmp, names=NAMES):
    """Writes the recordings as the GPU ran them (placement_fidelity.py --write-traces: the blocks
    an earlier workload left at each trace's head) into tmp; returns their paths."""
    gpu_dir = os.path.join(root, "bench", "results", "gpu-placement", "2026-12-06-h100")
    tdir = os.path.join(root, "bench", "results", "gpu-placement", "traces")
    p = subprocess.run([sys.executable, os.path.join(root, "bench", "placement_fidelity.py"), "--vram", vram,
                        "--write-traces", tmp, gpu_dir] + [os.path.join(tdir, n + ".trace.gz") for n in names],
                       capture_output=True, text=True)
    check(p.returncode == 0, "placement_fidelity.py --write-traces: status %d %s" % (p.returncode, p.stderr[-300:]))
    return [os.path.join(tmp, n + ".trace") for n in names]


def table(bench_exe, args):
    """{trace name: [cells]} of bench_step_plan's table (vram, calls, with plan, calls, ...)."""
    p = subprocess.run([bench_exe] + args, capture_output=True, text=True)
    check(p.returncode == 0, "bench_step_plan %s: status %d %s" % (" ".join(args[:3]), p.returncode, p.stderr[-300:]))
    got = {}
    for line in p.stdout.splitlines():
        if line.startswith("| ") and not line.startswith("| trace |"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            got[cells[0].replace(".trace", "")] = cells
    return got

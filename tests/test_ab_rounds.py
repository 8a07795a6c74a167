"""test_ab_rounds.py — bench/ab_rounds.py on made-up rounds: the per-round ratios, their medians
over rounds (of per-process medians and of fastest steps), the warm-up step left out, and bad
input (a misnamed file, no matching workload) refused with a message and a non-zero status."""
import json
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
script = os.path.join(root, "bench", "ab_rounds.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402


def write(d, name, alloc, times, workload="gpt2_generate"):
    path = os.path.join(d, name)
    json.dump({"results": [{"workload": workload, "allocator": alloc, "step_times_s": times}]}, open(path, "w"))
    return path


with tempfile.TemporaryDirectory() as d:
    # warm-up steps (first) are huge and must not count; vram is +10%, +0%, +20% by median over
    # rounds 1-3 and +10%, +5%, +20% by fastest step
    files = [write(d, "ab_r1_native.json", "native", [99, 2.0, 2.0, 2.0]),
             write(d, "ab_r1_vram.json", "vram", [99, 2.2, 2.2, 2.2]),
             write(d, "ab_r2_native.json", "native", [99, 2.0, 4.0, 4.0]),
             write(d, "ab_r2_vram.json", "vram", [99, 2.1, 4.0, 4.0]),
             write(d, "ab_r3_native.json", "native", [99, 1.0, 1.0, 1.0]),
             write(d, "ab_r3_vram.json", "vram", [99, 1.3, 1.2, 1.2])]
    r = subprocess.run([sys.executable, script] + files, capture_output=True, text=True)
    check(r.returncode == 0, "exit status %d: %s" % (r.returncode, r.stderr))
    rows = [l for l in r.stdout.splitlines() if l.startswith("| vram | 3 |")]
    check(len(rows) == 1, "one summary row for vram over 3 rounds:\n" + r.stdout)
    if rows:
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        check(cells[2] == "+10.0%", "median over rounds of per-process medians is +10.0%%, got %s" % cells[2])
        check(cells[3] == "+10.0%", "median over rounds of fastest steps is +10.0%%, got %s" % cells[3])
        check(cells[4] == "+5.0% … +20.0%", "range of fastest-step ratios, got %s" % cells[4])
    check("| 2 | vram | 3 | 4.000 | 2.100 | +0.0% | +5.0% |" in r.stdout, "round 2 row:\n" + r.stdout)
    # bad input
    bad = write(d, "run_vram.json", "vram", [1, 2])
    r = subprocess.run([sys.executable, script, bad], capture_output=True, text=True)
    check(r.returncode != 0 and "not named ab_r" in r.stderr, "misnamed file refused: %r" % r.stderr)
    r = subprocess.run([sys.executable, script, "--workload", "resnet50_train"] + files, capture_output=True, text=True)
    check(r.returncode != 0 and "no resnet50_train results" in r.stderr, "no such workload refused: %r" % r.stderr)
    junk = os.path.join(d, "ab_r9_x.json")
    open(junk, "w").write("{not json")
    r = subprocess.run([sys.executable, script, junk], capture_output=True, text=True)
    check(r.returncode != 0 and "cannot read" in r.stderr and "Traceback" not in r.stderr, "bad JSON refused: %r" % r.stderr)

    other = os.path.join(d, "ab_r8_x.json")
    open(other, "w").write("[1, 2]")
    r = subprocess.run([sys.executable, script, other], capture_output=True, text=True)
    check(r.returncode != 0 and "not a bench/torch_workloads.py result" in r.stderr and "Traceback" not in r.stderr,
          "JSON of another shape refused: %r" % r.stderr)

sys.exit(done("test_ab_rounds"))

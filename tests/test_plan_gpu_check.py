#!/usr/bin/env python3
"""Tests of tests/plan_gpu_check.py's grid part (the check of `vram plan --device cuda` against the
GPU grid's records, bench/plan_grid.py --device cuda --json), no GPU: records whose measured figures
are the plan's own pass; one measured 5% above the plan (planned under by more than 2%), one 4%
below (over by more than 3%), and one the GPU run could not measure are each a miss, named, and the
status is 1; a records file that is not there is an error, not a pass. Records say which runtime
made them ("grad_adopt", VRAM_GRAD_ADOPT): rows made with the switch off and no such field (as
records made before it existed) are planned with it off and pass.

    python3 tests/test_plan_gpu_check.py VRAM_EXE
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pycheck import check, done  # noqa: E402

VRAM = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("VRAM", "vram")
CHECK = os.path.join(HERE, "plan_gpu_check.py")
FLAGS = ["--model gpt:6x384 --heads 6 --context 256 --batch 16 --optimizer adamw --accum 1 --precision bf16",
         "--model gpt2 --context 512 --batch 8 --optimizer sgd --accum 1 --precision fp32 --checkpoint"]


ADOPT = 0 if os.environ.get("VRAM_GRAD_ADOPT") == "0" else 1  # the runtime's default (on), unless set


def planned(flags, steps, adopt=ADOPT):
    p = subprocess.run([VRAM, "plan", "--json", "--device", "cuda", "--steps", str(steps)] + flags.split(),
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, VRAM_GRAD_ADOPT=str(adopt),
                                VRAM_ALLOC_CONF="large_moves:False,chunk_divisor:0"))  # as plan_gpu_check.py plans
    r = json.loads(p.stdout)
    return r["peak_allocated"] / 2 ** 20, r["peak_reserved"] / 2 ** 20


def run_check(rows, d, head=None):
    path = os.path.join(d, "grid.json")
    with open(path, "w") as f:
        json.dump(dict({"steps": 4, "grad_adopt": ADOPT} if head is None else head, rows=rows, remedies=[]), f)
    p = subprocess.run([sys.executable, CHECK, VRAM, path], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout + p.stderr


with tempfile.TemporaryDirectory() as d:
    rows = []
    for flags in FLAGS:
        alloc, res = planned(flags, 4)
        rows.append({"flags": flags, "steps": 4, "measured_allocated": round(alloc, 2), "measured_reserved": round(res, 2)})
    status, out = run_check(rows, d)
    check(status == 0 and "2 of 2 configurations of the GPU grid planned within bounds" in out,
          "measured = planned: every row within bounds (status %d)\n%s" % (status, out[-800:]))
    under = [dict(rows[0], measured_reserved=rows[0]["measured_reserved"] * 1.05), rows[1]]
    status, out = run_check(under, d)
    check(status == 1 and "FAIL " + FLAGS[0] in out and "1 of 2 configurations" in out,
          "planned 5%% under the measured: a miss (status %d)\n%s" % (status, out[-800:]))
    over = [rows[0], dict(rows[1], measured_reserved=rows[1]["measured_reserved"] * 0.96)]
    status, out = run_check(over, d)
    check(status == 1 and "FAIL " + FLAGS[1] in out, "planned 4%% over the measured: a miss\n%s" % out[-800:])
    # a miss listed as known (with where it is explained) prints as one and does not fail; a row
    # listed so that is within bounds fails (the list is stale)
    path = os.path.join(d, "known.json")
    with open(path, "w") as f:
        json.dump({"steps": 4, "grad_adopt": ADOPT, "rows": under, "remedies": [],
                   "known_misses": {FLAGS[0]: "see results"}}, f)
    p = subprocess.run([sys.executable, CHECK, VRAM, path], capture_output=True, text=True, timeout=600)
    check(p.returncode == 0 and "KNOWN MISS " + FLAGS[0] in p.stdout and "1 of 2 configurations" in p.stdout and
          "1 known miss" in p.stdout, "a known miss: reported, status 0 (%d)\n%s" % (p.returncode, p.stdout[-800:]))
    with open(path, "w") as f:
        json.dump({"steps": 4, "grad_adopt": ADOPT, "rows": rows, "remedies": [],
                   "known_misses": {FLAGS[0]: "see results"}}, f)
    p = subprocess.run([sys.executable, CHECK, VRAM, path], capture_output=True, text=True, timeout=600)
    check(p.returncode == 1 and "now within bounds" in p.stdout, "a known miss within bounds: status 1\n%s" % p.stdout[-800:])
    old = []
    for flags in FLAGS:
        alloc, res = planned(flags, 4, adopt=0)
        old.append({"flags": flags, "steps": 4, "measured_allocated": round(alloc, 2),
                    "measured_reserved": round(res, 2)})
    status, out = run_check(old, d, head={"steps": 4})
    check(status == 0 and "2 of 2 configurations of the GPU grid planned within bounds" in out,
          "records without grad_adopt, made with VRAM_GRAD_ADOPT=0: within bounds (status %d)\n%s"
          % (status, out[-800:]))
    failed = rows + [{"flags": "--model gpt2 --batch 64", "steps": 4, "failed": "vram train: status 1\nout of memory"}]
    status, out = run_check(failed, d)
    check(status == 1 and "gave no figure" in out and "2 of 3 configurations" in out,
          "a configuration the GPU could not measure is a miss\n%s" % out[-800:])
    p = subprocess.run([sys.executable, CHECK, VRAM, os.path.join(d, "missing.json")], capture_output=True, text=True)
    check(p.returncode == 2 and "not a GPU grid's records" in p.stderr and "Traceback" not in p.stderr,
          "a missing records file: one message, status 2: %s" % p.stderr[-300:])
sys.exit(done("test_plan_gpu_check"))

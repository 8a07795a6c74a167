"""test_placement_workloads.py — bench/placement_workloads.py (issue 46's GPU programs) without a
GPU: its --report on made-up rounds (a ratio that differs between rounds shown as a range, step
time against native's same steps in the same round after the warm-up with each round's figure,
outputs equal to native's first round or their largest difference, sampled tokens compared token by
token, native's later rounds against its first), and unknown workloads refused before torch is imported."""
import json
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
script = os.path.join(root, "bench", "placement_workloads.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

GIB = 1024 ** 3


def result(workload, alloc, times, outputs, reserved, warmup=1):
    return {"workload": workload, "allocator": alloc, "outputs": outputs, "step_times_s": times,
            "warmup": warmup, "peak_reserved": reserved, "peak_requested": 2 * GIB, "peak_allocated": 2 * GIB,
            "ratio": reserved / (2 * GIB)}


with tempfile.TemporaryDirectory() as d:
    info = {"gpu": "Test GPU", "torch": "0", "cuda": "0", "date": "today"}
    rounds = {
        "r1_native": [result("ckpt_gpt2", "native", [9, 1.0, 1.0, 1.0], [5.0, 4.0], 2.2 * GIB),
                      result("gen_gpt2", "native", [9, 2.0, 2.0], [100.0, 200.0], 3 * GIB)],
        "r1_vram": [result("ckpt_gpt2", "vram", [9, 1.02, 1.02, 1.02], [5.0, 4.0], 2.1 * GIB),
                    result("gen_gpt2", "vram", [9, 2.0, 2.0], [100.0, 201.5], 2.1 * GIB)],
        "r2_native": [result("ckpt_gpt2", "native", [9, 1.0, 1.0, 1.0], [5.0, 4.0], 2.2 * GIB),
                      result("gen_gpt2", "native", [9, 2.0, 2.0], [100.0, 200.0], 3 * GIB)],
        "r2_vram": [result("ckpt_gpt2", "vram", [9, 1.04, 1.04, 1.04], [5.0, 4.0], 2.12 * GIB),
                    result("gen_gpt2", "vram", [9, 2.0, 2.0], [100.0, 200.0], 2.1 * GIB)],
    }
    def gen(alloc, tokens):
        r = result("gen_llama", alloc, [9, 3.0, 3.0], [float(sum(map(sum, tokens))), 0.0], 2.2 * GIB)
        r["tokens"] = tokens
        return r
    for rname, reserved in (("r1_native", None), ("r2_native", None), ("r1_plan", 2.08), ("r2_plan", 2.06)):
        if reserved is None:
            continue
        # under a step plan the allocator's requested bytes count the arena whole: the ratio is
        # taken over native's requested bytes of the same round
        r = result("ckpt_gpt2", "vram+plan:chunk_size_mb:16", [9, 1.0, 1.0, 1.0], [5.0, 4.0], reserved * GIB)
        r.update(peak_requested=3 * GIB, ratio=None, step_plan={"served": 90, "requests": 100})
        rounds.setdefault(rname, []).append(r)
    first = [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]
    rounds["r1_native"].append(gen("native", first))
    rounds["r1_vram"].append(gen("vram", [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 0]]))
    rounds["r2_native"].append(gen("native", [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 0, 0]]))
    rounds["r2_vram"].append(gen("vram", first))
    paths = []
    for name, rs in rounds.items():
        path = os.path.join(d, name + ".json")
        with open(path, "w") as f:
            json.dump({"info": info, "results": rs}, f)
        paths.append(path)
    p = subprocess.run([sys.executable, script, "--report"] + paths, capture_output=True, text=True)
    check(p.returncode == 0, "report runs: %s" % p.stderr)
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): [c.strip() for c in line.split("|")[1:-1]]
            for line in p.stdout.splitlines() if line.startswith("| ") and "---" not in line}
    ck = rows.get(("ckpt_gpt2", "vram"))
    check(ck is not None, "a row for ckpt_gpt2 under vram: %s" % p.stdout)
    if ck:
        check(ck[2] == "2", "two rounds counted: %s" % ck)
        check(ck[5] == "1.050–1.060", "a ratio that differs between rounds is a range: %s" % ck)
        check(ck[7] == "+3.0% (+2%, +4%)", "step time: the median over rounds of the per-step median ratio, "
              "and each round's: %s" % ck)
        check(ck[8] == "identical", "equal outputs: %s" % ck)
    gen = rows.get(("gen_gpt2", "vram"))
    if check(gen is not None, "a row for gen_gpt2 under vram"):
        check(gen[5] == "1.050", "equal ratios: one figure: %s" % gen)
        check(gen[8] == "max diff 1.5", "the largest output difference over rounds: %s" % gen)
    nat = rows.get(("ckpt_gpt2", "native"))
    if check(nat is not None, "a native row"):
        check(nat[7] == "-" and nat[8] == "run to run: identical", "native's later rounds against its first: %s" % nat)
    plan = rows.get(("ckpt_gpt2", "vram+plan:chunk_size_mb:16"))
    if check(plan is not None, "a row for the plan"):
        check(plan[3] == "2.000 GiB" and plan[5] == "1.030–1.040", "over native's requested bytes: %s" % plan)
        check(plan[8] == "identical; plan served 90 of 100", "the plan's counters: %s" % plan)
    gl_native = rows.get(("gen_llama", "native"))
    gl_vram = rows.get(("gen_llama", "vram"))
    if check(gl_native is not None and gl_vram is not None, "gen_llama rows"):
        # tokens, not their checksums: 10 of 12 equal between native's rounds; under vram 11 and 12 of 12
        check(gl_native[8] == "run to run: 83.3% of tokens equal", "native's own spread: %s" % gl_native)
        check(gl_vram[8] == "95.8% of tokens equal", "vram's tokens against native's first round: %s" % gl_vram)
    order = [k for k in rows]
    check(order.index(("ckpt_gpt2", "native")) < order.index(("ckpt_gpt2", "vram")) <
          order.index(("gen_gpt2", "native")), "rows by workload, native first: %s" % order)

    p = subprocess.run([sys.executable, script, "--workloads", "ckpt_gpt2,bogus"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH="/nonexistent"))
    check(p.returncode != 0 and "bogus" in p.stderr and "torch" not in p.stderr.lower().replace(
        "placement_workloads", ""), "an unknown workload is refused before torch: %s" % p.stderr)

sys.exit(done("test_placement_workloads"))

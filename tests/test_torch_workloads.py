"""test_torch_workloads.py — bench/torch_workloads.py without a GPU: its --report on made-up
results (rows in the workloads' order, the four bundled ones first and those of
bench/extra_workloads.py after, each allocator's step time against native's same steps, the loss
lines, compiled runs' restores), and --workloads and --compile refusing what they cannot run before
torch is touched."""
import json
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
script = os.path.join(root, "bench", "torch_workloads.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

GIB = 1024 ** 3


def result(workload, alloc, times, losses, reserved):
    return {"workload": workload, "allocator": alloc, "steps": len(times), "losses": losses, "step_times_s": times,
            "peak_reserved": reserved, "peak_requested": 2 * GIB, "device_used_peak": reserved,
            "reserved_over_requested": reserved / (2 * GIB), "num_device_alloc": 7, "num_device_free": 3,
            "device_calls_per_step": [5, 5, 0, 0]}


with tempfile.TemporaryDirectory() as d:
    info = {"gpu": "Test GPU", "torch": "0", "cuda": "0", "date": "today"}
    runs = {"native": [result("vit_train", "native", [9, 9, 1.0, 1.0], [7.0, 6.5, 6.0, 5.5], 3 * GIB),
                       result("gpt2_train", "native", [9, 9, 2.0, 2.0], [11.0, 10.0, 9.0, 8.0], 3 * GIB)],
            "vram": [result("vit_train", "vram", [9, 9, 1.1, 1.1], [7.0, 6.5, 6.0, 5.6], 2 * GIB + GIB // 50),
                     result("gpt2_train", "vram", [9, 9, 2.0, 2.0], [11.0, 10.0, 9.0, 8.0], 2 * GIB)],
            "native2": [result("vit_train", "native2", [9, 9, 1.0, 1.0], [7.0, 6.5, 6.0, 5.52], 3 * GIB)],
            "native#3": [result("vit_train", "native#3", [9, 9, 1.0, 1.0], [7.0, 6.5, 6.01, 5.5], 3 * GIB)],
            "vram#2": [result("vit_train", "vram#2", [9, 9, 1.0, 1.0], [7.0, 6.5, 6.0, 5.5], 2 * GIB)]}
    files = []
    for alloc, results in runs.items():
        files.append(os.path.join(d, "wl_%s.json" % alloc))
        json.dump({"info": info, "results": results}, open(files[-1], "w"))
    r = subprocess.run([sys.executable, script, "--report"] + files, capture_output=True, text=True)
    check(r.returncode == 0, "report exit status %d: %s" % (r.returncode, r.stderr))
    rows = [l for l in r.stdout.splitlines() if l.startswith("| gpt2_train") or l.startswith("| vit_train")]
    check([l.split("|")[1].strip() for l in rows] == ["gpt2_train"] * 2 + ["vit_train"] * 5,
          "bundled workloads first, then the extra ones:\n" + r.stdout)
    check("| vit_train | vram | 2.00 GiB | 2.02 GiB | 1.010 | 2.02 GiB | 1100.0 ms | +10.0% | 7, 5.6 |" in r.stdout,
          "vit_train under vram: memory, step time +10% after the warm-up steps, losses:\n" + r.stdout)
    check("| gpt2_train | vram | 2.00 GiB | 2.00 GiB | 1.000 | 2.00 GiB | 2000.0 ms | +0.0% | 11, 8 |" in r.stdout,
          "gpt2_train under vram:\n" + r.stdout)
    check("vit_train vram: max |loss - native loss| = 0.1; against each of 3 native runs: median 0.1, max 0.1 "
          "(native run-to-run: 0.02 (median 0.02, 3 pairs))" in r.stdout,
          "loss difference of an extra workload, against every native run, beside native's own spread:\n" + r.stdout)
    check("vit_train vram#2: max |loss - native loss| = 0; against each of 3 native runs: median 0.01, max 0.02 "
          "(native run-to-run: 0.02 (median 0.02, 3 pairs))" in r.stdout,
          "a repeated vram run (vram#2) against every native run:\n" + r.stdout)
    check("vit_train native#3: max |loss - native loss| = 0.01 (native run-to-run" in r.stdout,
          "a third native run (native#3) counts as native:\n" + r.stdout)
    check("gpt2_train vram: max |loss - native loss| = 0 (native run-to-run: not measured: no native2 run)"
          in r.stdout and "gpt2_train native:" not in r.stdout,
          "without a second native run no spread is claimed:\n" + r.stdout)
    check("vit_train vram: 4 steps, device maps/allocs 7, unmaps/frees 3" in r.stdout, "device calls:\n" + r.stdout)
    # compiled runs: the mode said once, vram's graph tree restores per workload
    compiled = dict(result("gpt2_train", "vram", [9, 9, 2.0, 2.0], [11.0, 10.0, 9.0, 8.0], 2 * GIB),
                    compile="reduce-overhead", graph_trees={"restores": 4, "recreated": 9, "adopted": 5})
    json.dump({"info": info, "results": [compiled]}, open(files[1], "w"))
    r = subprocess.run([sys.executable, script, "--report", files[0], files[1]], capture_output=True, text=True)
    check("compiled with torch.compile(mode=reduce-overhead)" in r.stdout and "gpt2_train vram: CUDA graph trees: 4 "
          "checkpoint restores, 9 blocks recreated, 5 storages adopted" in r.stdout, "a compiled run:\n" + r.stdout)
    r = subprocess.run([sys.executable, script, "--alloc", "vram", "--compile", "reduce-overhead", "--workloads",
                        "vit_train"], capture_output=True, text=True)
    check(r.returncode == 2 and "--compile: only with" in r.stderr, "--compile of an extra workload refused: %r" % r.stderr)
    # an unknown workload: refused with the known names, before any allocator or torch is set up
    r = subprocess.run([sys.executable, script, "--alloc", "vram", "--workloads", "vit_train,resnet_9000"],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "unknown resnet_9000" in r.stderr and "effnet_infer" in r.stderr
          and "Traceback" not in r.stderr, "unknown workload refused: %r" % r.stderr)

sys.exit(done("test_torch_workloads"))

"""test_latency_rounds.py — bench/latency_rounds.py on made-up logs in both programs' formats
(bench_alloc_latency for vram, bench_torch_alloc for PyTorch): per-round ratios and their median
over rounds, median times, and bad input (a misnamed file, a log without figures, no baseline
process) refused with a message and a non-zero status."""
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
script = os.path.join(root, "bench", "latency_rounds.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402


def write(d, name, pair512, pair256m, rnd, warm, header="allocator: vram pages"):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(header + "\n")
        f.write("pair        512 B: %10.1f ns/pair (median of 5 x 100000)\n" % pair512)
        f.write("pair  268435456 B: %10.1f ns/pair (median of 5 x 100000)\n" % pair256m)
        f.write("random: %8.1f ns/op (median of 5; min 1.0, max 2.0), peak reserved 9.41 GB, peak allocated 8.14 GB\n" % rnd)
        f.write("random warm: %8.1f ns/op (median of 5; min 1.0, max 2.0), peak reserved 9.53 GB\n" % warm)
        f.write("device calls: 1417 allocs/maps, 1371 frees/unmaps\n")
    return path


def run(files, *extra):
    return subprocess.run([sys.executable, script] + list(extra) + files, capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    nat = "allocator: native (PYTORCH_CUDA_ALLOC_CONF=)"
    # vram / native per round: pair 512 B 0.05, 0.10, 0.20 -> median 0.100; random warm 0.2, 0.3, 0.25 -> 0.250
    files = [write(d, "lat_r1_native.log", 500, 400, 600, 500, nat), write(d, "lat_r1_vram.log", 25, 40, 120, 100),
             write(d, "lat_r2_native.log", 300, 400, 600, 400, nat), write(d, "lat_r2_vram.log", 30, 40, 120, 120),
             write(d, "lat_r3_native.log", 200, 400, 600, 400, nat), write(d, "lat_r3_vram.log", 40, 40, 120, 100),
             write(d, "lat_r1_base.log", 50, 40, 150, 200)]
    r = run(files)
    check(r.returncode == 0, "exit status %d: %s" % (r.returncode, r.stderr))
    ratios = r.stdout.split("ratio to native")[-1].split("median ns over rounds")[0]
    ratio = [l for l in ratios.splitlines() if l.startswith("| vram |")]
    check(len(ratio) == 1, "one ratio row for vram:\n" + r.stdout)
    if ratio:
        cells = [c.strip() for c in ratio[0].strip("|").split("|")]
        check(cells[1:] == ["0.100 (3)", "0.100 (3)", "0.200 (3)", "0.250 (3)"], "vram ratios: %s" % cells)
    base = [l for l in ratios.splitlines() if l.startswith("| base |")]
    check(base and "0.100 (1)" in base[0] and "0.400 (1)" in base[0], "base ratios over its one round: %s" % base)
    med = [l for l in r.stdout.split("median ns over rounds")[1].splitlines() if l.startswith("| vram |")]
    check(med and med[0].split("|")[2].strip() == "30.0", "vram's median pair 512 B: %s" % med)
    check("pair 512 B" in r.stdout and "pair 256 MiB" in r.stdout and "random warm" in r.stdout,
          "columns named by size:\n" + r.stdout)
    check("| 2 | vram | 30.0 | 40.0 | 120.0 | 120.0 |" in r.stdout, "per-process row:\n" + r.stdout)

    bad = os.path.join(d, "vram.log")
    open(bad, "w").write("pair 512 B: 1.0 ns/pair\n")
    r = run(files + [bad])
    check(r.returncode != 0 and "lat_r<round>_<kind>.log" in r.stderr, "misnamed file refused: %s" % r.stderr)
    empty = os.path.join(d, "lat_r4_vram.log")
    open(empty, "w").write("BUILD FAILED\n")
    r = run(files + [empty])
    check(r.returncode != 0 and "no latency figures" in r.stderr, "log without figures refused: %s" % r.stderr)
    r = run([f for f in files if "native" not in f])
    check(r.returncode != 0 and "no native process" in r.stderr, "missing baseline refused: %s" % r.stderr)
    r = run([os.path.join(d, "lat_r9_vram.log")])
    check(r.returncode != 0 and "cannot read" in r.stderr and "Traceback" not in r.stderr, "missing file: %s" % r.stderr)

sys.exit(done("test_latency_rounds"))

"""placement_fidelity.py — does `vram replay --device cudasim` reproduce what
bench/run_placement_gpu.sh measured on a GPU? The recorded traces of placement_workloads.py's
programs replayed beside the GPU's JSON results, per workload and allocator configuration.

    python3 bench/placement_fidelity.py [--vram build/vram] [--check TOL] GPU_DIR TRACE...

GPU_DIR holds the run's r*.json. Per workload: PyTorch native's ratio (peak reserved / peak
requested) on the GPU (median over rounds) and replayed (PyTorch's peak reserved, from the trace's
header, over the replay's peak requested); then for each vram configuration the GPU ran ("vram",
"vram:CONF"), the GPU's ratio (its range over rounds) beside `vram replay --conf CONF` on cudasim
and on cudasim:lag=100 (the GPU's work 100 calls behind the host).

All workloads run in one process, and the first leaves blocks allocated for good (cuBLAS's
workspaces: two of 32 MiB and two of 1 MiB on an H100) that count in every later workload's
peaks on the GPU. Traces recorded before 2026-12-06 10:00 UTC lack them; for those (no
live_at_start header line) every workload after the first is replayed with --live blocks
allocated at its head (default the H100's: 32MiB,32MiB,1MiB,1MiB).

--base-conf CONF: applied under every vram configuration's own (comma-joined before it): the
allocator as the GPU run's tree placed, where the working tree places otherwise. The H100 run of
2026-12-06 09:35 UTC predates large_moves (docs/alloc_conf.md): `--base-conf large_moves:False`.

--write-traces DIR: also writes each trace as replayed (the blocks above at its head) to
DIR/NAME.trace, for other tools (bench_placement_waste, bench_step_plan) to replay as the GPU ran.

--check TOL: exit 1 unless, for every workload and configuration, the nearer of the two replays
lies within TOL of the GPU's range, and the replayed native ratio within TOL of the GPU's.
"""
import argparse
import glob
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile

FIRST = "ckpt_gpt2"  # placement_workloads.py's first workload: the one whose trace holds the workspaces
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def fail(message):
    """Bad input or a replay that failed: the message, status 2 (1 is --check's)."""
    print(message, file=sys.stderr)
    sys.exit(2)


def parse_size(text):
    """Bytes of "32MiB", "1GiB", "4096"; a bad size fails."""
    try:
        for unit, mult in UNITS.items():
            if text.endswith(unit):
                return int(float(text[:-len(unit)]) * mult)
        return int(text)
    except ValueError:
        fail("bad size %r (a number of bytes, or with KiB, MiB or GiB)" % text)


def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            return f.read()
    except (OSError, UnicodeDecodeError, EOFError) as e:
        fail("cannot read trace %s: %s" % (path, e))


def with_live(text, sizes):
    """The trace with one allocation per size on stream 0 before its first record, and without
    its peak_requested_bytes line (the replay computes the peak from the records)."""
    out, done = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("# peak_requested_bytes:"):
            continue
        if not done and line[:2] in ("a ", "f "):
            out.extend("a %d %d 0\n" % (10 ** 15 + i, s) for i, s in enumerate(sizes))
            done = True
        out.append(line)
    return "".join(out)


def header(text):
    h = {}
    for line in text.splitlines():
        if line[:2] in ("a ", "f "):
            break
        if line.startswith("# ") and ":" in line:
            k, v = line[2:].split(":", 1)
            h[k.strip()] = v.strip()
    return h


def replay(vram, device, conf, path):
    cmd = [vram, "replay", "--json", "--device", device] + (["--conf", conf] if conf else []) + [path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail("placement_fidelity.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-300:]))
    return json.loads(p.stdout.splitlines()[0])


def gpu_results(gpu_dir):
    runs = {}  # (workload, allocator) -> [ratio per round]
    files = sorted(glob.glob(os.path.join(gpu_dir, "r*.json")))
    if not files:
        fail("placement_fidelity.py: no r*.json in %s" % gpu_dir)
    for path in files:
        for r in json.load(open(path))["results"]:
            if r.get("ratio"):
                runs.setdefault((r["workload"], r["allocator"]), []).append(r["ratio"])
    return runs


def distance(x, lo, hi):
    return lo - x if x < lo else x - hi if x > hi else 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vram", default=os.path.join("build", "vram"))
    p.add_argument("--live", default="32MiB,32MiB,1MiB,1MiB")
    p.add_argument("--check", type=float)
    p.add_argument("--base-conf", default="")
    p.add_argument("--write-traces")
    p.add_argument("gpu_dir")
    p.add_argument("traces", nargs="+")
    a = p.parse_args()
    if not os.access(a.vram, os.X_OK):
        fail("placement_fidelity.py: %s is not an executable (build vram, or pass --vram)" % a.vram)
    if a.write_traces and not os.path.isdir(a.write_traces):
        fail("placement_fidelity.py: --write-traces %s is not a folder" % a.write_traces)
    live = [parse_size(s) for s in a.live.split(",") if s]
    runs = gpu_results(a.gpu_dir)
    print("# command: %s" % " ".join(sys.argv))
    print("# ratio: peak reserved / peak requested; GPU: median (native) or range over rounds%s\n" %
          ("; replays under " + a.base_conf if a.base_conf else ""))
    print("| workload | native GPU | native replayed | allocator | GPU | cudasim | cudasim:lag=100 |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for path in a.traces:
            name = os.path.basename(path).split(".")[0]
            text = read_text(path)
            if name != FIRST and "live_at_start_bytes" not in header(text):
                text = with_live(text, live)
            work = os.path.join(a.write_traces or tmp, name + ".trace")
            with open(work, "w") as f:
                f.write(text)
            base = replay(a.vram, "cudasim", "", work)
            native_gpu = runs.get((name, "native"))
            native_rep = base.get("pytorch_native_over_requested")
            cells = ["%.3f" % statistics.median(native_gpu) if native_gpu else "-",
                     "%.3f" % native_rep if native_rep else "-"]
            if native_gpu and native_rep:
                worst = max(worst, abs(native_rep - statistics.median(native_gpu)))
            allocs = sorted(al for (w, al) in runs if w == name and al != "native")
            for al in allocs or ["vram"]:
                conf = ",".join(c for c in (a.base_conf, al.split(":", 1)[1] if ":" in al else "") if c)
                r0 = replay(a.vram, "cudasim", conf, work)["reserved_over_requested"]
                r1 = replay(a.vram, "cudasim:lag=100", conf, work)["reserved_over_requested"]
                g = runs.get((name, al))
                gtext = "-"
                if g:
                    lo, hi = min(g), max(g)
                    gtext = "%.3f" % lo if lo == hi else "%.3f–%.3f" % (lo, hi)
                    worst = max(worst, min(distance(r0, lo, hi), distance(r1, lo, hi)))
                print("| %s | %s | %s | %s | %s | %.3f | %.3f |" % (name, cells[0], cells[1], al, gtext, r0, r1), flush=True)
    print("\nlargest distance of the nearer replay from the GPU: %.3f" % worst)
    if a.check is not None and worst > a.check:
        print("placement_fidelity.py: the replays lie %.3f from the GPU's figures (more than %.3f)" % (worst, a.check),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

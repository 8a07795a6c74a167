#!/usr/bin/env python3
"""placements_check.py — bench_placements and expandable_model.py --placements, the pair used to
compare vram's placements with PyTorch's decision by decision, print the same format and agree where
the two allocators place alike.

usage: placements_check.py BENCH_PLACEMENTS SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

TRACE = """# memtrace v1
a 1 4194304 0
a 2 4194304 0
a 9 1000 0
f 1
a 3 2097152 0
a 4 8388608 0
f 9
"""
# event index, size, offset from the first large allocation (the small one is not listed)
EXPECTED = ["0 4194304 0", "1 4194304 4194304", "4 2097152 0", "5 8388608 8388608"]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, src = sys.argv[1], sys.argv[2]
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += not ok

    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.trace")
        with open(trace, "w") as f:
            f.write(TRACE)
        run = subprocess.run([binary, trace], capture_output=True, text=True)
        check(run.returncode == 0, f"bench_placements exits 0 ({run.stderr.strip()})")
        lines = run.stdout.splitlines()
        check(lines and lines[0].startswith("# machine:") and any(l.startswith("# command:") for l in lines),
              "header lines name the machine and the command")
        vram = [l for l in lines if not l.startswith("#")]
        check(vram == EXPECTED, f"vram's placements {vram}")
        model_out = os.path.join(d, "model.txt")
        m = subprocess.run([sys.executable, os.path.join(src, "bench", "expandable_model.py"), "--page-mb-large", "2",
                            "--placements", model_out, trace], capture_output=True, text=True)
        check(m.returncode == 0, f"the model exits 0 ({m.stderr.strip()})")
        with open(model_out) as f:
            model = f.read().splitlines()
        check(model == vram, f"the model places alike: {model}")
        run = subprocess.run([binary, "--free-at", "4", trace], capture_output=True, text=True)
        check("FREE 0 4194304" in run.stdout.splitlines(), "--free-at shows the hole the 2 MiB request takes")
        run = subprocess.run([binary], capture_output=True, text=True)
        check(run.returncode == 2 and "usage" in run.stderr, "no trace: usage, status 2")
        run = subprocess.run([binary, os.path.join(d, "missing.trace")], capture_output=True, text=True)
        check(run.returncode == 2 and "missing.trace" in run.stderr, "a missing trace is named, status 2")
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

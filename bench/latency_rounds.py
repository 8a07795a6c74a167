#!/usr/bin/env python3
"""latency_rounds.py — docs/benchmarks.md §2 latency ratios from interleaved rounds of processes.

One latency process per allocator is not enough on the H200 machine: the same binary's ratio to
PyTorch native moved 2.5x between rounds (bench/results/2026-12-02-cuda-latency.md, run 13). So
bench/run_gpu.sh's `latrounds` mode runs the allocators in turns, ROUNDS times, pinned to one
core, and saves each process's output as lat_r<round>_<kind>.log: bench_alloc_latency's output
for vram builds (kinds `vram`, and `base` for an older build to compare with), and
bench_torch_alloc's for PyTorch (kind `native`). Both print the same lines:

    pair        512 B:     33.0 ns/pair (median of 5 x 100000)
    random:    182.4 ns/op (median of 5; ...)
    random warm:    121.5 ns/op (median of 5; ...)

This report prints every process's figures, then per kind the ratio to the baseline process of
the same round and the median of those ratios over rounds (the figure the issue's "<= 1/10 of
native" is checked against), and each kind's median time over rounds.

    python3 bench/latency_rounds.py [--baseline native] FILE.log...
"""
import argparse
import re
import statistics
import sys

LINE = re.compile(r"^(pair\s+(\d+) B|random|random warm):\s+([0-9.]+) ns/")


def parse(path):
    """{measure: ns} of one process's log; measure is 'pair <bytes>', 'random' or 'random warm'."""
    try:
        text = open(path).read()
    except OSError as e:
        raise SystemExit("latency_rounds: cannot read %s: %s" % (path, e))
    out = {}
    for line in text.splitlines():
        m = LINE.match(line.strip())
        if m:
            key = "pair %s" % m.group(2) if m.group(2) else m.group(1)
            out[key] = float(m.group(3))
    return out


def order(measure):
    return (0, int(measure.split()[1])) if measure.startswith("pair") else (1, measure)


def label(measure):
    if not measure.startswith("pair"):
        return measure
    n = int(measure.split()[1])
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return "pair %d %s" % (n // size, unit)
    return "pair %d B" % n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default="native")
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    runs = {}  # {round: {kind: {measure: ns}}}
    for f in a.files:
        m = re.search(r"lat_r(\d+)_([A-Za-z0-9_.-]+)\.log$", f)
        if not m:
            raise SystemExit("latency_rounds: %s is not named lat_r<round>_<kind>.log" % f)
        figures = parse(f)
        if not figures:
            raise SystemExit("latency_rounds: %s holds no latency figures (pair/random lines)" % f)
        runs.setdefault(int(m.group(1)), {})[m.group(2)] = figures
    if not any(a.baseline in r for r in runs.values()):
        raise SystemExit("latency_rounds: no %s process in the files" % a.baseline)
    kinds = sorted({k for r in runs.values() for k in r}, key=lambda k: (k != a.baseline, k))
    measures = sorted({m for r in runs.values() for k in r.values() for m in k}, key=order)

    print("ns per pair / per operation, each process (lat_r<round>_<kind>.log)\n")
    print("| round | kind | " + " | ".join(label(m) for m in measures) + " |")
    print("|---|---|" + "---|" * len(measures))
    for rnd in sorted(runs):
        for k in kinds:
            if k in runs[rnd]:
                row = [("%.1f" % runs[rnd][k][m]) if m in runs[rnd][k] else "-" for m in measures]
                print("| %d | %s | %s |" % (rnd, k, " | ".join(row)))

    print("\nratio to %s in the same round; median over rounds (rounds counted)\n" % a.baseline)
    print("| kind | " + " | ".join(label(m) for m in measures) + " |")
    print("|---|" + "---|" * len(measures))
    for k in kinds:
        if k == a.baseline:
            continue
        cells = []
        for m in measures:
            r = [runs[n][k][m] / runs[n][a.baseline][m] for n in sorted(runs)
                 if m in runs[n].get(k, {}) and runs[n].get(a.baseline, {}).get(m)]
            cells.append("%.3f (%d)" % (statistics.median(r), len(r)) if r else "-")
        print("| %s | %s |" % (k, " | ".join(cells)))

    print("\nmedian ns over rounds\n")
    print("| kind | " + " | ".join(label(m) for m in measures) + " |")
    print("|---|" + "---|" * len(measures))
    for k in kinds:
        cells = []
        for m in measures:
            v = [runs[n][k][m] for n in runs if m in runs[n].get(k, {})]
            cells.append("%.1f" % statistics.median(v) if v else "-")
        print("| %s | %s |" % (k, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

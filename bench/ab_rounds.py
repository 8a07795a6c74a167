#!/usr/bin/env python3
"""ab_rounds.py — step time of one workload under several allocators, from interleaved rounds.

A GPU machine shared with other work has slow stretches that last longer than one process (on the
H200 machine, generation steps of one process ran at 2.2 s or 4.3 s for the same allocator), so
one process per allocator cannot tell 3% apart. bench/run_gpu.sh's `ab` mode therefore runs the
allocators in turns, ROUNDS times, each process pinned to the same cores, and writes one
bench/torch_workloads.py JSON per process, named ab_r<round>_<allocator>.json. This report takes
those files and prints, per process, the median and the fastest of its timed steps (the first
step is a warm-up), then per allocator the ratio to the baseline's process of the same round,
with the median over rounds: of the per-process medians and of the per-process fastest steps
(the fastest step is the one least touched by the machine's slow stretches).

    python3 bench/ab_rounds.py [--baseline native] [--workload gpt2_generate] FILE.json...
"""
import argparse
import json
import re
import statistics
import sys


def load(files, workload):
    """{round: {allocator: step times (s) of the workload, warm-up dropped}}"""
    runs = {}
    for f in files:
        m = re.search(r"ab_r(\d+)_", f)
        if not m:
            raise SystemExit("ab_rounds: %s is not named ab_r<round>_<allocator>.json" % f)
        try:
            d = json.load(open(f))
        except (OSError, ValueError) as e:
            raise SystemExit("ab_rounds: cannot read %s: %s" % (f, e))
        if not isinstance(d, dict) or not isinstance(d.get("results", []), list):
            raise SystemExit("ab_rounds: %s is not a bench/torch_workloads.py result" % f)
        for r in d.get("results", []):
            if r.get("workload") == workload and len(r.get("step_times_s", [])) >= 2:
                runs.setdefault(int(m.group(1)), {})[r["allocator"]] = r["step_times_s"][1:]
    return runs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default="native")
    p.add_argument("--workload", default="gpt2_generate")
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    runs = load(a.files, a.workload)
    if not runs:
        raise SystemExit("ab_rounds: no %s results with two or more steps in the files" % a.workload)
    kinds = sorted({k for r in runs.values() for k in r}, key=lambda k: (k != a.baseline, k))
    print("%s: step time per process (s; first step dropped as warm-up)\n" % a.workload)
    print("| round | allocator | steps | median | fastest | vs %s (median) | vs %s (fastest) |" % (a.baseline, a.baseline))
    print("|---|---|---|---|---|---|---|")
    ratios = {k: ([], []) for k in kinds}
    for rnd in sorted(runs):
        base = runs[rnd].get(a.baseline)
        for k in kinds:
            t = runs[rnd].get(k)
            if not t:
                continue
            med, low = statistics.median(t), min(t)
            vs = ("", "")
            if base and k != a.baseline:
                rm, rf = med / statistics.median(base), low / min(base)
                ratios[k][0].append(rm)
                ratios[k][1].append(rf)
                vs = ("%+.1f%%" % (100 * (rm - 1)), "%+.1f%%" % (100 * (rf - 1)))
            print("| %d | %s | %d | %.3f | %.3f | %s | %s |" % (rnd, k, len(t), med, low, vs[0], vs[1]))
    print("\n| allocator | rounds | vs %s, median over rounds (of medians) | (of fastest steps) | range (fastest) |" % a.baseline)
    print("|---|---|---|---|---|")
    for k in kinds:
        rm, rf = ratios[k]
        if not rm:
            continue
        print("| %s | %d | %+.1f%% | %+.1f%% | %+.1f%% … %+.1f%% |" % (
            k, len(rm), 100 * (statistics.median(rm) - 1), 100 * (statistics.median(rf) - 1),
            100 * (min(rf) - 1), 100 * (max(rf) - 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

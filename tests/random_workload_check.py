#!/usr/bin/env python3
"""random_workload_check.py — the two tools that take the random latency workload apart:
  - bench_random_split's two tables: every timed call counted once by kind and once by what it
    asked of the device, shares that add up to the whole, device calls that follow the device (the
    sim device has no events; cudasim's warm runs move pages);
  - bench_random_floor's table: vram and the floor allocator both ran the workload (the same peak
    allocated bytes, up to vram's rounding of small requests to size classes; the floor's range at
    least that), the size-class allocator too (at most 1/32 more allocated, more than twice the
    floor's range reserved), the harness alone (no allocator) took less time than any, and the
    ratios printed are the table's; with --sizes small, only the small pool's requests ran;
and bad flags refused by both.

usage: random_workload_check.py BENCH_RANDOM_SPLIT BENCH_RANDOM_FLOOR
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

OPS = 200000  # docs/benchmarks.md §2


def tables(text):
    """The rows of each markdown table in text: [{first cell: [other cells]}...]."""
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cur is None:
                cur = {}
                out.append(cur)
                continue  # the header
            cur[cells[0]] = cells[1:]
        elif not line.startswith("|"):
            cur = None
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, floor = sys.argv[1], sys.argv[2]
    for spec, runs in (("cudasim", 2), ("sim", 1)):
        run = subprocess.run([binary, spec, "--runs", str(runs)], capture_output=True, text=True)
        check(run.returncode == 0, f"{spec}: exits 0 ({run.stderr.strip()})")
        check(run.stdout.startswith("machine:") and "command:" in run.stdout, f"{spec}: names the machine and command")
        t = tables(run.stdout)
        check(len(t) == 2, f"{spec}: two tables ({len(t)})")
        if len(t) != 2:
            continue
        by_kind, by_asked = t
        kinds = ["malloc, small", "malloc, large", "free, small", "free, large"]
        asked = ["nothing", "stream events only", "memory (maps, unmaps, moves)"]
        check(list(by_kind) == kinds + ["all"], f"{spec}: rows by kind {list(by_kind)}")
        check(list(by_asked) == asked, f"{spec}: rows by what was asked {list(by_asked)}")
        calls = sum(int(by_kind[k][0]) for k in kinds)
        check(calls == runs * OPS and int(by_kind["all"][0]) == calls, f"{spec}: {calls} calls by kind")
        check(sum(int(by_asked[k][0]) for k in asked) == calls, f"{spec}: the same calls by what was asked")
        for name, rows, keys in (("kind", by_kind, kinds), ("asked", by_asked, asked)):
            share = sum(float(rows[k][2].rstrip("%")) for k in keys)
            check(abs(share - 100) < 0.5, f"{spec}: shares by {name} add up to {share:.1f}%")
        m = re.search(r"device calls: ([0-9.]+) memory, ([0-9.]+) stream-event, per run", run.stdout)
        check(m is not None, f"{spec}: device calls per run printed")
        if not m:
            continue
        memory, events = float(m.group(1)), float(m.group(2))
        if spec == "sim":  # no events, and a warm run finds every page mapped
            check(events == 0 and int(by_asked["stream events only"][0]) == 0, f"sim: no stream events ({events})")
        else:  # cudasim's warm runs move a few chunks (reserve budget) and record events for them
            check(memory > 0 and int(by_asked["memory (maps, unmaps, moves)"][0]) > 0,
                  f"cudasim: warm runs make memory calls ({memory} per run)")
        check(float(re.search(r"Whole runs \(harness included\): ([0-9.]+) ns", run.stdout).group(1)) > 0,
              f"{spec}: the whole-run figure")
    for args, status, message in ((["--runs", "0"], 2, "must be 1 to 100"), (["--bogus"], 2, "usage"),
                                  (["nosuchdevice"], 1, "nosuchdevice")):
        run = subprocess.run([binary] + args, capture_output=True, text=True)
        check(run.returncode == status and message in run.stderr and "|" not in run.stdout,
              f"{' '.join(args)}: refused, naming it, status {run.returncode}: {run.stderr.strip()}")
    run = subprocess.run([floor, "sim", "--runs", "1"], capture_output=True, text=True)
    check(run.returncode == 0, f"floor: exits 0 ({run.stderr.strip()})")
    check(run.stdout.startswith("machine:") and "command:" in run.stdout, "floor: names the machine and command")
    t = tables(run.stdout)
    rows = t[0] if t else {}
    names = list(rows)
    check(len(names) == 4 and names[0] == "vram" and names[1].startswith("floor") and
          names[2].startswith("size classes") and names[3].startswith("harness"), f"floor: rows {names}")
    if len(names) == 4:
        (v, f, c, h) = (rows[n] for n in names)
        gb = lambda cell: float(cell.split()[0])
        check(abs(gb(v[4]) - gb(f[4])) <= 0.01 * gb(f[4]) and gb(f[4]) > 7,
              f"floor: both allocated the workload's peak ({v[4]}, {f[4]})")
        check(gb(f[3]) >= gb(f[4]), f"floor: its range covers what it allocated ({f[3]})")
        # size classes round each request up by at most 1/32, and never hand a freed block to
        # another class: it allocates a little more than the floor and reserves far more
        check(gb(f[4]) <= gb(c[4]) <= gb(f[4]) * 33 / 32 + 0.01,
              f"size classes: allocated the peak, rounded up by at most 1/32 ({c[4]})")
        check(gb(c[3]) > 2 * gb(f[3]), f"size classes: reserve more than twice the floor's range ({c[3]}, {f[3]})")
        check(all(float(x) > 0 for x in v[:3] + f[:3] + c[:3] + h[:3]), "floor: times printed")
        # (one run's medians: on a loaded machine the harness can tie the others at 0.1 ns)
        check(all(float(h[0]) <= float(x[0]) * 1.02 for x in (v, f, c)) and h[3] == "-",
              f"floor: the harness alone is the fastest and allocates nothing ({h})")
        m = re.search(r"vram / floor: ([0-9.]+)", run.stdout)
        check(m is not None and abs(float(m.group(1)) - float(v[0]) / float(f[0])) < 0.01,
              "floor: the ratio is the medians'")
        m = re.search(r"less the harness: vram ([0-9.]+) ns, floor ([0-9.]+) ns an operation; vram / floor ([0-9.]+)",
                      run.stdout)
        own = (float(v[0]) - float(h[0]), float(f[0]) - float(h[0]))
        check(m is not None and abs(float(m.group(1)) - own[0]) < 0.11 and abs(float(m.group(2)) - own[1]) < 0.11 and
              abs(float(m.group(3)) - own[0] / own[1]) < 0.01, "floor: the harness taken off both medians")
        m = re.search(r"size classes, less the harness: ([0-9.]+) ns an operation, ([0-9.]+) of the floor's; "
                      r"peak reserved ([0-9.]+) of the floor's", run.stdout)
        mine = float(c[0]) - float(h[0])
        # the ratio of two differences of 0.1 ns-rounded medians: its tolerance is what that rounding allows
        # (where the floor's own time is within that rounding of zero, the ratio says nothing)
        rounding = 0.01 + (0.1 + 0.1 * abs(mine) / max(own[1], 0.2)) / max(own[1], 0.2)
        ratio_ok = m is not None and (own[1] <= 0.2 or abs(float(m.group(2)) - mine / own[1]) < rounding)
        check(m is not None and abs(float(m.group(1)) - mine) < 0.11 and ratio_ok
              and abs(float(m.group(3)) - gb(c[3]) / gb(f[3])) < 0.02, "size classes: the line beneath is the table's")
    run = subprocess.run([floor, "sim", "--runs", "1", "--sizes", "small"], capture_output=True, text=True)
    t = tables(run.stdout)
    rows = t[0] if t else {}
    small = [float(c[4].split()[0]) for name, c in rows.items() if not name.startswith("harness")]
    check(run.returncode == 0 and "sizes: small" in run.stdout and len(small) == 3 and all(0 < x < 1 for x in small),
          f"floor --sizes small: only the small pool's requests, under 1 GB live ({small}, {run.stderr.strip()})")
    for args, message in ((["--runs", "0"], "must be 1 to 99"), (["--bogus"], "usage"),
                          (["--sizes", "medium"], "--sizes must be all, small or large, not 'medium'")):
        run = subprocess.run([floor] + args, capture_output=True, text=True)
        check(run.returncode == 2 and message in run.stderr and "|" not in run.stdout,
              f"floor {' '.join(args)}: refused, status {run.returncode}: {run.stderr.strip()}")
    sys.exit(done("random_workload_check"))


if __name__ == "__main__":
    main()

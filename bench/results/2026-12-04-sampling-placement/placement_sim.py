#!/usr/bin/env python3
"""placement_sim.py — how much address range simple placement rules need for a trace's large blocks.

    python3 placement_sim.py TRACE.trace.gz

Takes the blocks of a memtrace v1 trace that PyTorch's rules put in the large pool (rounded to
512 bytes, above 1 MiB) and places them, in the trace's order, in one address range that never
moves a byte: each rule picks a free hole that fits (or, if none does, the end of the range,
growing the free block that ends there), frees coalesce with their neighbours, and a free block
at the end shrinks the range. Prints, for each rule, the largest extent the range reached over
the peak of the live large bytes: what an allocator that places by that rule and moves no pages
would reserve for these blocks, relative to what they request. (No streams, no page granularity,
no small pool: a lower bound on what such an allocator holds, not a replay of vram.)
"""
import bisect
import gzip
import sys


def large_events(path):
    live, events = {}, []
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.split()
            if fields[0] == "a":
                size = (int(fields[2]) + 511) // 512 * 512
                if size > 1 << 20:
                    live[fields[1]] = size
                    events.append((fields[1], size))
            elif fields[0] == "f" and fields[1] in live:
                del live[fields[1]]
                events.append((fields[1], None))
    return events


def extent_ratio(events, choose, at_end=lambda hole, size: False):
    """Peak extent / peak live bytes under rule `choose(holes, size)` -> (index, addr, size) or None."""
    free, live = [], {}  # free: (addr, size) sorted by address, the end of the range excluded
    top = peak_top = live_bytes = peak_live = 0
    for key, size in events:
        if size is not None:
            live_bytes += size
            peak_live = max(peak_live, live_bytes)
            holes = [(i, a, s) for i, (a, s) in enumerate(free) if s >= size]
            hole = choose(holes, size) if holes else None
            if hole is None:
                if free and free[-1][0] + free[-1][1] == top:  # grow the free block at the end
                    addr = free.pop()[0]
                else:
                    addr = top
                top = addr + size
            else:
                i, a, s = hole
                addr = a + s - size if at_end(hole, size) else a
                rest = (a, s - size) if addr != a else (a + size, s - size)
                if s > size:
                    free[i] = rest
                else:
                    free.pop(i)
            live[key] = (addr, size)
            peak_top = max(peak_top, top)
        else:
            a, s = live.pop(key)
            live_bytes -= s
            i = bisect.bisect(free, (a, 0))
            if i < len(free) and free[i][0] == a + s:
                s += free.pop(i)[1]
            if i > 0 and free[i - 1][0] + free[i - 1][1] == a:
                a, s = free[i - 1][0], s + free[i - 1][1]
                free.pop(i - 1)
                i -= 1
            if a + s == top:
                top = a
            else:
                free.insert(i, (a, s))
    return peak_top / peak_live, peak_live


RULES = [
    ("best fit, lowest address first (PyTorch's rule)", lambda h, n: min(h, key=lambda x: (x[2], x[1])), None),
    ("best fit, highest address first", lambda h, n: min(h, key=lambda x: (x[2], -x[1])), None),
    ("best fit, placed at the hole's end", lambda h, n: min(h, key=lambda x: (x[2], x[1])), lambda hole, n: True),
    ("first fit (lowest address)", lambda h, n: h[0], None),
    ("first fit from the highest address", lambda h, n: h[-1], None),
    ("worst fit", lambda h, n: max(h, key=lambda x: (x[2], -x[1])), None),
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: placement_sim.py TRACE")
    events = large_events(sys.argv[1])
    print("| rule | peak extent / peak live large bytes |")
    print("|---|---|")
    for name, choose, at_end in RULES:
        ratio, peak = extent_ratio(events, choose, at_end or (lambda hole, n: False))
        print("| %s | %.4f |" % (name, ratio))
    print("\npeak live large bytes: %.2f MiB" % (peak / 2**20))


if __name__ == "__main__":
    main()

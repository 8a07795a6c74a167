#!/usr/bin/env python3
"""compare_rows.py — compares two bench_replay_lag tables row by row.

    python3 compare_rows.py BEFORE.txt AFTER.txt

Each file holds the table rows bench_replay_lag prints (`| trace | lag | conf | reserved /
requested | maps | unmaps | aliases | drops | late | driver ms |`), the same traces and lags in the
same order. Prints each row whose figure or device calls differ, then how many rows hold less,
more or the same, the geometric mean of reserved / requested and the summed driver time.
"""
import math
import sys


def rows(path):
    out = []
    for line in open(path):
        cells = [c.strip() for c in line.split("|")][1:-1]
        if len(cells) >= 10 and cells[0] != "trace":
            out.append(cells)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: compare_rows.py BEFORE.txt AFTER.txt")
    before, after = rows(sys.argv[1]), rows(sys.argv[2])
    if [r[:2] for r in before] != [r[:2] for r in after]:
        sys.exit("compare_rows.py: the two tables do not hold the same traces and lags")
    less = more = same = 0
    log0 = log1 = ms0 = ms1 = 0.0
    for a, b in zip(before, after):
        r0, r1 = float(a[3]), float(b[3])
        log0 += math.log(r0)
        log1 += math.log(r1)
        ms0 += float(a[-1])
        ms1 += float(b[-1])
        if a[3:] == b[3:]:
            same += 1
            continue
        less += r1 < r0
        more += r1 > r0
        print("%-46s lag %5s  %s -> %s   maps/unmaps/aliases/drops %s -> %s   driver ms %s -> %s"
              % (a[0][:46], a[1], a[3], b[3], "/".join(a[4:8]), "/".join(b[4:8]), a[-1], b[-1]))
    n = len(before)
    print("rows %d: %d hold less, %d more, %d the same in every column; geometric mean %.4f -> %.4f; "
          "driver ms %.0f -> %.0f" % (n, less, more, same, math.exp(log0 / n), math.exp(log1 / n), ms0, ms1))


if __name__ == "__main__":
    main()

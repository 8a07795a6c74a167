"""snapshot_layout.py — one pool's blocks in address order, from a snapshot that `vram replay
--snapshot FILE` wrote at the peak of reserved memory: what lies where when the peak is set.

    python3 bench/snapshot_layout.py [--pool large|small] [--from MIB] SNAPSHOT.json

Each mapped range of the pool ("segment" in the snapshot: pages mapped side by side) is one line:
its offset and size, then its blocks as `L5.59@381.0` (in use, MiB at MiB from the pool's first
range) or `.27.96@389.4` (free). The last lines sum the free bytes of the mapped ranges and list
the free blocks of 1 MiB or more, largest first: the holes the peak holds. --from MIB leaves out
blocks below that offset (the parameters). Exit status 2 on a file that is not such a snapshot.
"""
import argparse
import json
import sys

MIB = float(1 << 20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pool", choices=["large", "small"], default="large")
    ap.add_argument("--from", dest="start", type=float, default=0.0, help="leave out blocks below this offset (MiB)")
    ap.add_argument("snapshot")
    a = ap.parse_args()
    try:
        with open(a.snapshot) as f:
            segs = [s for s in json.load(f)["segments"] if s["segment_type"] == a.pool]
        for s in segs:
            for b in s["blocks"]:
                b["address"], b["size"], b["state"]  # noqa: B018 (the fields this reads)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("snapshot_layout.py: %s: not a vram snapshot (%s)" % (a.snapshot, e), file=sys.stderr)
        sys.exit(2)
    if not segs:
        print("snapshot_layout.py: %s: no %s pool memory mapped" % (a.snapshot, a.pool), file=sys.stderr)
        sys.exit(2)
    base = min(s["address"] for s in segs)
    holes, free_total, mapped = [], 0, 0
    for s in sorted(segs, key=lambda s: s["address"]):
        mapped += s["total_size"]
        cells = []
        for b in s["blocks"]:
            off, size, live = (b["address"] - base) / MIB, b["size"] / MIB, b["state"].startswith("active")
            if not live:
                free_total += b["size"]
                holes.append((size, off))
            if off + size > a.start:
                cells.append("%s%.2f@%.1f" % ("L" if live else ".", size, off))
        print("[%.1f +%.1f] %s" % ((s["address"] - base) / MIB, s["total_size"] / MIB, " ".join(cells)))
    big = sorted((h for h in holes if h[0] >= 1.0), reverse=True)
    print("mapped %.1f MiB, free in it %.1f MiB; free blocks of 1 MiB or more: %s" % (
        mapped / MIB, free_total / MIB, ", ".join("%.2f@%.1f" % h for h in big) or "none"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""expandable_model.py — a model of PyTorch's expandable segments, replayed over memtrace v1 files.

    python3 bench/expandable_model.py [--page-mb-large 20] [--placements FILE] TRACE.gz...

Prints, per trace, peak reserved / peak requested memory as PyTorch's caching allocator with
`expandable_segments:True` would hold it on one stream, so vram's placement can be compared with
PyTorch's decision by decision (e.g. the first allocation placed at a different offset).

The model, after c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.x), one stream, no memory limit:
  - sizes round up to 512 B; rounded sizes up to 1 MiB use the small pool, larger the large pool;
  - each pool is one virtual range; its mapped part grows at the end in pages of 2 MiB (small
    pool) or 20 MiB (large pool, kLargeBuffer) and is never unmapped;
  - free blocks merge with free neighbours at once; a request takes the best fit by (size,
    address), where the free block at the mapped end counts as unbounded (PyTorch counts it with
    the unmapped space after it), so it is used only when no other free block fits; the end is
    then mapped as far as the request needs;
  - a block is split when at least 512 B remain.
On the H200 (bench/results/2026-12-02-torch-workloads.md) it reproduces PyTorch's measured peaks:
ResNet-50 1.0169 (1.017 measured), GPT-2 training 1.0698 (1.070), BERT 1.0137 (1.014), the
bundled GPT-2 sampling trace 1.0795 (its header: 1.0795), traces/recorded/gpt2_generate_h200
1.0864 (1.086 measured).
"""
import argparse
import bisect
import gzip
import sys

MiB = 1 << 20
UNBOUNDED = 1 << 62


class Pool:
    """One pool's virtual range: free blocks indexed by start, end and (size, address)."""

    def __init__(self, page):
        self.page = page
        self.end = 0  # bytes mapped from the start of the range
        self.by_size = []  # sorted (size key, address); the block at the mapped end has UNBOUNDED
        self.start = {}  # address -> size
        self.stop = {}  # address + size -> address

    def _key(self, addr, size):
        return (UNBOUNDED if addr + size == self.end else size, addr)

    def _add(self, addr, size):
        bisect.insort(self.by_size, self._key(addr, size))
        self.start[addr] = size
        self.stop[addr + size] = addr

    def _remove(self, addr):
        size = self.start.pop(addr)
        del self.stop[addr + size]
        del self.by_size[bisect.bisect_left(self.by_size, self._key(addr, size))]
        return size

    def free(self, addr, size):
        if addr in self.stop:  # merge with the free block before
            prev = self.stop[addr]
            size += self._remove(prev)
            addr = prev
        if addr + size in self.start:  # and the one after
            size += self._remove(addr + size)
        self._add(addr, size)

    def alloc(self, rsize):
        """Returns (address, bytes the block holds)."""
        i = bisect.bisect_left(self.by_size, (rsize, -1))
        if i < len(self.by_size):  # the best fit, or else the free block at the mapped end
            addr = self.by_size[i][1]
            size = self._remove(addr)
        else:  # the last block is in use: start a new one at the mapped end
            addr, size = self.end, 0
        if size < rsize:  # the block at the mapped end: map what the request still needs
            new_end = (addr + rsize + self.page - 1) // self.page * self.page
            size = new_end - addr
            self.end = new_end
        if size - rsize >= 512:
            self._add(addr + rsize, size - rsize)
            return addr, rsize
        return addr, size


def replay(path, page_large, placements=None):
    """Peak reserved and peak requested bytes; with `placements` (a file), one line per large-pool
    allocation: "EVENT SIZE OFFSET" (as bench_placements prints vram's)."""
    pools = {True: Pool(2 * MiB), False: Pool(page_large)}
    live = {}
    requested = peak_requested = peak_reserved = 0
    event = -1
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            event += 1
            fields = line.split()
            if fields[0] == "a":
                size = int(fields[2])
                rsize = 512 if size < 512 else (size + 511) // 512 * 512
                small = rsize <= MiB
                addr, held = pools[small].alloc(rsize)
                if placements and not small:
                    placements.write("%d %d %d\n" % (event, size, addr))
                live[fields[1]] = (small, addr, held, size)
                requested += size
                peak_requested = max(peak_requested, requested)
                peak_reserved = max(peak_reserved, pools[True].end + pools[False].end)
            elif fields[0] == "f" and fields[1] in live:
                small, addr, held, size = live.pop(fields[1])
                requested -= size
                pools[small].free(addr, held)
    return peak_reserved, peak_requested


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--page-mb-large", type=int, default=20, help="large-pool mapping granularity (PyTorch: 20)")
    p.add_argument("--placements", metavar="FILE",
                   help="write each large allocation's placement (EVENT SIZE OFFSET) of the one trace, "
                        "to compare with bench_placements")
    p.add_argument("traces", nargs="+")
    a = p.parse_args()
    if a.placements and len(a.traces) != 1:
        p.error("--placements takes one trace")
    print("| trace | peak requested | expandable segments (model): peak reserved | reserved / requested |")
    print("|---|---|---|---|")
    for t in a.traces:
        try:
            if a.placements:
                with open(a.placements, "w") as out:
                    reserved, requested = replay(t, a.page_mb_large * MiB, out)
            else:
                reserved, requested = replay(t, a.page_mb_large * MiB)
        except (OSError, ValueError, IndexError) as e:
            print("expandable_model: %s: %s" % (t, e), file=sys.stderr)
            return 1
        print("| %s | %.2f MiB | %.2f MiB | %.4f |" % (t.split("/")[-1], requested / MiB, reserved / MiB,
                                                      reserved / requested if requested else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""placement_model.py — how far a different choice of addresses could take a trace's large pool,
without pages: each policy places the trace's large requests (more than 1 MiB, vram's large pool)
in one address range that never gives memory back, and its high-water mark over the peak of live
bytes is the reserved / requested ratio a pages allocator that never moves a page would reach.

    python3 bench/placement_model.py [--policy P ...] [--seeds N] [--window A:B] TRACE...

Policies (default best, first, oracle, learned):
  best       the smallest hole that fits, the lowest address of equals (vram's best fit, less its
             bins, deferred frees and pages): it matches `vram replay --device cudasim` where no
             page moves (Llama generation: 752.9 MiB here, 754 MiB mapped there)
  first      the lowest address that fits
  random:P   best fit, except that in the events of --window each request takes, with probability
             P, a random hole that fits and a random end of it (--seeds runs, sorted): whether a
             neighbour of best fit does better
  oracle     the hole (any but the top) whose neighbours die closest in time to the request itself,
             at the end next to the nearer one; death times read from the trace (placement that
             knows every lifetime: a bound, not an allocator)
  learned:K  as oracle, with death = now + the lifetime last seen for the same context: the size's
             ratios to the last K large events (allocations and frees), as an allocator could learn
             online; no prediction yet: best fit
Prints the machine, the command and one table row per trace and policy. Deterministic.
"""
import argparse
import bisect
import gzip
import math
import os
import platform
import random
import sys

LARGE = 1 << 20        # vram's large pool: requests above 1 MiB
TOP = 1 << 50          # the range's end: a hole reaching it is the untouched top
FAR = float("inf")


def fail(message):
    print("placement_model.py: " + message, file=sys.stderr)
    sys.exit(2)


def load(path):
    """[(op, id, bytes)] of a memtrace v1 file (plain or gzip): op 0 allocates, 1 frees."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as e:
        fail("%s: %s" % (path, e))
    events = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line[0] == "#":
            continue
        f = line.split()
        try:
            if f[0] == "a":
                events.append((0, f[1], int(f[2])))
            elif f[0] == "f":
                events.append((1, f[1], 0))
            else:
                raise ValueError("op %r" % f[0])
        except (IndexError, ValueError) as e:
            fail("%s:%d: not a memtrace v1 record (%s)" % (path, n, e))
    return events


class Heap:
    """One address range: free holes as a sorted list of [addr, size], live blocks by id."""

    def __init__(self):
        self.holes = [[0, TOP]]
        self.live = {}               # id -> (addr, size)
        self.starts, self.ends = {}, {}  # block start / end address -> id
        self.high = self.used = self.peak = 0

    def fitting(self, size):
        return [h for h in self.holes if h[1] >= size]

    def take(self, id_, hole, size, at_end):
        addr = hole[0] + hole[1] - size if at_end else hole[0]
        if hole[1] == size:
            self.holes.remove(hole)
        elif at_end:
            hole[1] -= size
        else:
            hole[0] += size
            hole[1] -= size
        self.live[id_] = (addr, size)
        self.starts[addr], self.ends[addr + size] = id_, id_
        self.used += size
        self.high = max(self.high, addr + size)
        self.peak = max(self.peak, self.used)

    def release(self, id_):
        addr, size = self.live.pop(id_)
        del self.starts[addr], self.ends[addr + size]
        self.used -= size
        i = bisect.bisect(self.holes, [addr, 0])
        if i < len(self.holes) and self.holes[i][0] == addr + size:
            size += self.holes.pop(i)[1]
        if i > 0 and sum(self.holes[i - 1]) == addr:
            self.holes[i - 1][1] += size
        else:
            self.holes.insert(i, [addr, size])


def best_of(holes):
    return min(holes, key=lambda h: (h[1], h[0]))


def by_neighbours(heap, holes, size, death, me):
    """The hole whose neighbours' deaths lie closest to `me` (any hole but the top, unless none
    else fits), and whether to place at its end (the nearer neighbour is above)."""
    def dist(id_):
        d = death.get(id_)
        return FAR if id_ is None or d is None else abs(d - me)
    inner = [h for h in holes if sum(h) < TOP] or holes
    h = min(inner, key=lambda h: (min(dist(heap.ends.get(h[0])), dist(heap.starts.get(sum(h)))), h[1], h[0]))
    below, above = dist(heap.ends.get(h[0])), dist(heap.starts.get(sum(h)))
    return h, sum(h) < TOP and h[1] > size and above < below


def ratio_key(size, history, k):
    return tuple((op, round(8 * math.log2(size / s))) for op, s in history[-k:])


def run(events, policy, seed=0, window=(0, 0)):
    """The heap after placing `events` under `policy`."""
    name, _, arg = policy.partition(":")
    heap, rng = Heap(), random.Random(seed)
    deaths, born, key_of, learned, history, est = {}, {}, {}, {}, [], {}
    if name == "oracle":
        for i, (op, id_, _) in enumerate(events):
            if op == 1:
                deaths[id_] = i
    large = set()
    for i, (op, id_, size) in enumerate(events):
        if op == 1:
            if id_ in large:
                large.discard(id_)
                if name == "learned":
                    learned[key_of.pop(id_)] = i - born[id_]
                history.append(("f", heap.live[id_][1]))
                heap.release(id_)
            continue
        if size <= LARGE:
            continue
        size = (size + 511) // 512 * 512
        large.add(id_)
        holes, at_end = heap.fitting(size), False
        hole = best_of(holes)
        if name == "first":
            hole = min(holes, key=lambda h: h[0])
        elif name == "random" and window[0] <= i < window[1] and rng.random() < float(arg):
            hole = rng.choice(holes)
            at_end = sum(hole) < TOP and rng.random() < 0.5
        elif name == "oracle":
            est[id_] = deaths.get(id_, len(events) + i)
            hole, at_end = by_neighbours(heap, holes, size, est, est[id_])
        elif name == "learned":
            key_of[id_], born[id_] = ratio_key(size, history, int(arg)), i
            life = learned.get(key_of[id_])
            if life is not None:
                est[id_] = i + life
                hole, at_end = by_neighbours(heap, holes, size, est, est[id_])
        heap.take(id_, hole, size, at_end)
        history.append(("a", size))
    return heap


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", action="append", help="best, first, random:P, oracle, learned:K (repeatable)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--window", default="0:0", help="events A:B where random:P perturbs best fit")
    ap.add_argument("traces", nargs="+")
    a = ap.parse_args()
    policies = a.policy or ["best", "first", "oracle", "learned:4"]
    for p in policies:
        name, _, arg = p.partition(":")
        ok = (name in ("best", "first", "oracle") and not arg) or (name == "random" and arg) or \
             (name == "learned" and arg.isdigit() and int(arg) > 0)
        try:
            ok = ok and (name != "random" or 0 <= float(arg) <= 1)
        except ValueError:
            ok = False
        if not ok:
            fail("unknown policy %r (best, first, random:P with 0<=P<=1, oracle, learned:K with K>0)" % p)
    try:
        window = tuple(int(x) for x in a.window.split(":"))
        if len(window) != 2 or a.seeds < 1:
            raise ValueError
    except ValueError:
        fail("--window is A:B (event numbers), --seeds a positive count")
    loaded = [(path, load(path)) for path in a.traces]  # bad input before any figure
    print("# machine: %s, %d cores, %s" % (platform.processor() or platform.machine(), os.cpu_count() or 0,
                                           platform.platform()))
    print("# command: %s" % " ".join(sys.argv))
    print("# MiB of the large pool (requests above 1 MiB); ratio: high-water mark / peak of live bytes\n")
    print("| trace | policy | high-water mark | peak live | ratio |\n|---|---|---|---|---|")
    for path, events in loaded:
        name = os.path.basename(path).split(".")[0]
        for p in policies:
            seeds = range(a.seeds) if p.startswith("random") else [0]
            heaps = [run(events, p, s, window) for s in seeds]
            if not heaps[0].peak:
                fail("%s: no request above 1 MiB" % path)
            ratios = sorted(h.high / h.peak for h in heaps)
            h = min(heaps, key=lambda x: x.high / x.peak)  # (of several seeds: the lowest)
            cell = "%.4f" % ratios[0] if len(ratios) == 1 else "%.4f .. %.4f (median %.4f, %d seeds)" % (
                ratios[0], ratios[-1], ratios[len(ratios) // 2], len(ratios))
            print("| %s | %s | %.1f | %.1f | %s |" % (name, p, h.high / 2**20, h.peak / 2**20, cell))


if __name__ == "__main__":
    main()

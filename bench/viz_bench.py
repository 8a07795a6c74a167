#!/usr/bin/env python3
"""viz_bench.py — how fast `vram viz` pages open and move, on synthetic traces of 1M and 3M events.

Writes a memtrace of N events shaped like training (parameters allocated once; each step
allocates activations and temporaries and frees them, with `# sync:` step marks), turns it into a
page with `vram viz` (timed: the export), and opens the page in headless Chromium several times
with its self-test (#selftest, src/cli/viz/selftest.js), which reports the time from navigation
to the first complete picture and the time of each zoom (wheel) and pan (drag) frame. Prints the
machine, the commands and the medians.

usage: viz_bench.py VRAM_BINARY [EVENTS...] [--runs N] [--keep DIR]
   (default events: 1000000 3000000; runs: 3)
"""
import json
import html
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def write_trace(path, events, seed=42):
    """A training-shaped memtrace of exactly `events` events (all allocations freed by the end)."""
    rng = random.Random(seed)
    out, live, next_id, n, step = ["# memtrace v1", "# source: bench/viz_bench.py synthetic, seed %d" % seed], [], 0, 0, 0

    def alloc(size):
        nonlocal next_id, n
        out.append("a %d %d 0" % (next_id, size))
        next_id += 1
        n += 1
        return next_id - 1

    def free(i):
        nonlocal n
        out.append("f %d" % i)
        n += 1

    params = [alloc(rng.choice((4, 16, 64)) << 20) for _ in range(200)]
    while n < events - len(params) - 2000:
        step += 1
        out.append("# sync: step %d" % step)
        acts = []
        for _ in range(rng.randint(300, 700)):
            acts.append(alloc(int(rng.lognormvariate(13, 2.5)) + 1))
            if rng.random() < 0.6:
                t = alloc(int(rng.lognormvariate(11, 2)) + 1)
                free(t)
            if n >= events - len(params) - 2000:
                break
        while acts:
            free(acts.pop())
    while n < events - len(params) - 1:  # pad to the exact count with short-lived temporaries
        free(alloc(512))
    while n < events - len(params):
        alloc(512)
        live.append(next_id - 1)
    for i in live + params:
        free(i)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return n


def browser():
    for b in (os.environ.get("VRAM_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if b and shutil.which(b):
            return shutil.which(b)
    sys.exit("viz_bench: no Chromium (tests/install_chromium.sh installs Debian's)")


def open_page(chromium, page):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1100", "--dump-dom",
           "file://" + os.path.abspath(page) + "#selftest&m0=peak&steps=12"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, timeout=600)
    wall = time.perf_counter() - t0
    m = re.search(r'<pre id="vram-selftest"[^>]*>([^<]*)</pre>', p.stdout.decode(errors="replace"))
    if not m or not m.group(1).strip():
        sys.exit("viz_bench: the page did not run its self-test: %s" % p.stderr.decode(errors="replace")[-2000:])
    r = json.loads(html.unescape(m.group(1)))
    if r.get("errors") or r.get("exception"):
        sys.exit("viz_bench: the page failed: %s %s" % (r.get("exception"), r.get("errors", [])[:3]))
    return r, wall, " ".join(cmd[:-1]) + " 'file://PAGE#selftest&m0=peak&steps=12'"


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    vram, runs, keep, sizes = args[0], 3, None, []
    i = 1
    while i < len(args):
        if args[i] == "--runs":
            runs, i = int(args[i + 1]), i + 2
        elif args[i] == "--keep":
            keep, i = args[i + 1], i + 2
        else:
            sizes.append(int(args[i]))
            i += 1
    sizes = sizes or [1_000_000, 3_000_000]
    chromium = browser()
    ver = subprocess.run([chromium, "--version"], capture_output=True).stdout.decode().strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    print("machine: %s, %d cores, %s; %s" % (cpu, os.cpu_count(), platform.platform(), ver))
    tmp = keep or tempfile.mkdtemp(prefix="viz_bench.")
    os.makedirs(tmp, exist_ok=True)
    try:
        for n in sizes:
            trace, page = os.path.join(tmp, "synth_%d.trace" % n), os.path.join(tmp, "synth_%d.html" % n)
            write_trace(trace, n)
            exports = []
            for _ in range(runs):
                t0 = time.perf_counter()
                p = subprocess.run([vram, "viz", trace, "-o", page], capture_output=True)
                exports.append(time.perf_counter() - t0)
                if p.returncode:
                    sys.exit("viz_bench: vram viz failed: %s" % p.stderr.decode())
            paint, zoom, pan, worst, walls = [], [], [], [], []
            for _ in range(runs):
                r, wall, cmd = open_page(chromium, page)
                paint.append(r["firstPaintMs"])
                zoom.append(r["zoom"]["median"])
                pan.append(r["pan"]["median"])
                worst.append(r["maxFrameMs"])
                walls.append(wall)
            med = statistics.median
            print("\n%d events: vram viz %s -o PAGE   (trace %.1f MB)" % (n, os.path.basename(trace), os.path.getsize(trace) / 1e6))
            print("  command: %s" % cmd)
            print("  HTML size            %.1f MB" % (os.path.getsize(page) / 1e6))
            print("  export (vram viz)    median %.2f s   runs %s" % (med(exports), ["%.2f" % x for x in exports]))
            print("  first paint          median %.0f ms  runs %s" % (med(paint), ["%.0f" % x for x in paint]))
            print("  zoom frame           median %.1f ms  (per run medians %s)" % (med(zoom), ["%.1f" % x for x in zoom]))
            print("  pan frame            median %.1f ms  (per run medians %s)" % (med(pan), ["%.1f" % x for x in pan]))
            print("  slowest frame        median %.1f ms  runs %s" % (med(worst), ["%.1f" % x for x in worst]))
            print("  browser process      median %.1f s (start to DOM dump, self-test included)" % med(walls))
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""fault_sweep.py — host allocation failure at every point of two runs of `vram` (issue 41).

    fault_sweep.py VRAM_FAULTY CORPUS

VRAM_FAULTY is the vram command built with tests/faults/fail_alloc.c: VRAM_FAIL_ALLOC_AT=N makes
its Nth host allocation fail. Each run is done once to learn its answer and its number of
allocations, then once per N. Every injected run must end without a signal or a sanitizer
report (the sanitizer build checks leaks too) and either give the uninjected answer with status
0, or status non-zero with one clear message that says host memory ran out and, for the replay,
no figure on stdout. The runs: `vram replay --summary --fit --json` of a small two-stream trace,
and `vram train` for 2 steps of a one-layer model on one thread (so the order of allocations,
and thus N, is the same in every run).
"""
import os
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pycheck import check, done, run, script_args  # noqa: E402

SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer")
HOST_MESSAGE = re.compile(r"host out of memory|out of host memory|no host memory|Cannot allocate memory")
# figures that are times, not answers
TIMING = re.compile(r"\"(seconds|events_per_second|read_seconds|parse_seconds)\": [0-9.e+-]+|"
                    r"[0-9.]+ tok/s|[0-9.]+ ms|in [0-9.]+ s|[0-9.]+ tokens/s")


def small_trace(path):
    """60 events on streams 0 and 1, sizes from 512 B to 3 MiB, every allocation freed."""
    lines = ["# memtrace v1", "# source: fault sweep"]
    live, nid, seed = [], 1, 12345
    for _ in range(60):
        seed = (seed * 1103515245 + 12345) % (1 << 31)
        if live and seed % 10 < 4:
            lines.append("f %d" % live.pop(seed % len(live)))
        else:
            size = [512, 4096, 100000, 1 << 20, 3 << 20][seed % 5]
            lines.append("a %d %d %d" % (nid, size, (seed >> 8) % 3 == 2))
            live.append(nid)
            nid += 1
    lines += ["f %d" % i for i in live]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def normal(text):
    return TIMING.sub("T", text)


def sweep(name, exe, args, tmp, figures_on_failure):
    env = dict(os.environ)
    env.pop("VRAM_FAIL_ALLOC_AT", None)
    count_file = os.path.join(tmp, name + ".count")
    env["VRAM_FAIL_ALLOC_REPORT"] = count_file
    base = run([exe] + args, env=env, timeout=300)
    if not check(base.returncode == 0, "%s: the uninjected run succeeds: %s" % (name, base.stderr[-500:])):
        return
    with open(count_file) as f:
        points = int(f.read())
    check(points > 10, "%s: %d allocation points" % (name, points))
    expect = normal(base.stdout)
    del env["VRAM_FAIL_ALLOC_REPORT"]

    def one(n):
        e = dict(env, VRAM_FAIL_ALLOC_AT=str(n))
        return n, run([exe] + args, env=e, timeout=300)

    right = errors = bad = 0
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for n, r in pool.map(one, range(1, points + 1)):
            what = "%s, allocation %d failed: status %d, stderr %r" % (name, n, r.returncode, r.stderr[-400:])
            ok = check(r.returncode >= 0 and r.returncode < 128 and not SANITIZER.search(r.stderr),
                       "no crash, leak or undefined behaviour: " + what)
            if ok and r.returncode == 0:
                ok = check(normal(r.stdout) == expect, "status 0 gives the uninjected answer: " + what)
                right += ok
            elif ok:
                ok = check(HOST_MESSAGE.search(r.stderr) is not None and r.stderr.count("\n") <= 3,
                           "a clear host-memory message: " + what)
                if ok and not figures_on_failure:
                    ok = check(r.stdout == "", "no figure on stdout: %s; stdout %r" % (what, r.stdout[:300]))
                errors += ok
            bad += not ok
    print("%s: %d points: %d the right answer, %d a clear error, %d wrong" % (name, points, right, errors, bad))


def main():
    exe, corpus = script_args(2, __doc__)
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "small.trace")
        small_trace(trace)
        sweep("replay", exe, ["replay", "--summary", "--fit", "--json", trace], tmp, False)
        sweep("train", exe, ["train", "--data", corpus, "--steps", "2", "--layers", "1", "--heads", "1", "--width", "8",
                             "--context", "8", "--batch", "2", "--threads", "1", "--eval-every", "0"], tmp, True)
    return done("fault_sweep")


if __name__ == "__main__":
    sys.exit(main())

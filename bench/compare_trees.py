#!/usr/bin/env python3
"""compare_trees.py — the guard for refactors of the allocator: placement must not change.

    bench/compare_trees.py [--rev REV] [--quick] [--no-ops] [--out FILE]

Builds two trees in a scratch folder, REV (default main, exported with `git archive`) and the
working tree (its files as they are, committed or not), then compares
  1. every `vram replay --json --fit` row, byte for byte after dropping the timing fields, over
     the bundled traces (traces/*.trace.gz, traces/unseen, traces/recorded) on --device sim and
     cudasim: any difference is a failure;
  2. the pair and random microbenchmarks' instructions per operation (bench/guard/ops.c, built
     against each tree's libvram.a, run at N and 2N operations under valgrind's cachegrind; the
     difference cancels the setup), reported with the change in percent; an increase above
     --tolerance percent is a failure (cachegrind's counts are exact: any change is the code's).
Prints the machine, the command and one line per comparison; exit status 0 when both hold, 1
when they do not, 2 on bad usage or a failed build. Needs cmake, a C compiler, git and
valgrind (apt-get install valgrind).
"""
import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMING_KEYS = ("seconds", "events_per_second", "read_seconds", "parse_seconds")
PAIR_SIZES = (512, 64 << 10, 1 << 20, 16 << 20, 256 << 20)
CONFS = ("", "expandable_segments:False")


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def export_tree(dest):
    """The working tree's tracked and untracked (not ignored) files, copied to dest."""
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        src = os.path.join(ROOT, f.decode())
        if not os.path.isfile(src):
            continue  # deleted in the working tree
        dst = os.path.join(dest, f.decode())
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)


def export_rev(rev, dest):
    os.makedirs(dest, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)


def build(src, b, jobs):
    sh(["cmake", "-S", src, "-B", b, "-DCMAKE_BUILD_TYPE=Release"], stdout=subprocess.DEVNULL)
    sh(["cmake", "--build", b, "-j", str(jobs), "--target", "vram", "vram_static"], stdout=subprocess.DEVNULL)
    ops = os.path.join(b, "guard_ops")
    cache = open(os.path.join(b, "CMakeCache.txt")).read()
    zlib = re.search(r"^ZLIB_INCLUDE_DIR:PATH=(.*)$", cache, re.M)
    libs = ["-lpthread", "-ldl", "-lm"] + (["-lz"] if zlib and "NOTFOUND" not in zlib.group(1) else [])
    sh(["cc", "-O2", "-std=gnu11", "-I", os.path.join(src, "include"), os.path.join(ROOT, "bench/guard/ops.c"),
        os.path.join(b, "libvram.a"), "-o", ops] + libs)
    return os.path.join(b, "vram"), ops


def traces():
    found = []
    for pattern in ("traces/*.trace.gz", "traces/unseen/*.trace.gz", "traces/recorded/*.trace.gz"):
        found += sorted(glob.glob(os.path.join(ROOT, pattern)))
    return [os.path.relpath(t, ROOT) for t in found]


def replay_rows(vram, trace, device):
    """The JSON rows of one replay, timing fields dropped, as text lines."""
    p = subprocess.run([vram, "replay", "--json", "--fit", "--device", device, os.path.join(ROOT, trace)],
                       capture_output=True, text=True)
    rows = []
    for line in p.stdout.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            rows.append(line)
            continue
        for k in TIMING_KEYS:
            row.pop(k, None)
        row["trace"] = trace
        rows.append(json.dumps(row, sort_keys=True))
    rows.append("exit status %d; stderr %s" % (p.returncode, p.stderr.strip()))
    return rows


def text_rows(vram, group, device):
    """`vram replay --fit` of a group of traces as text (the table and its means), with the
    replay times dropped: each trace's "replay: N events in ..." line and the table's last
    (M events/s) column."""
    p = subprocess.run([vram, "replay", "--fit", "--device", device] + [os.path.join(ROOT, t) for t in group],
                       capture_output=True, text=True, cwd=ROOT)
    rows, in_table = [], False
    for line in p.stdout.splitlines():
        if re.match(r"^\s*replay: \d+ events in ", line):
            continue
        if "Mev/s" in line:
            in_table = True
        elif in_table and line.startswith("geometric mean"):
            in_table = False
        elif in_table:
            line = re.sub(r"\s+[0-9.]+$", "", line)
        rows.append(line)
    rows.append("exit status %d; stderr %s" % (p.returncode, p.stderr.strip()))
    return rows


def instructions(ops, args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        p = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=" + out, ops] + args,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("%s %s: %s" % (ops, " ".join(args), p.stderr[-500:]))
        for line in open(out):
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError("no cachegrind summary for %s" % " ".join(args))


def per_op(ops, device, conf, loop, n):
    base = [device, conf] + loop
    return (instructions(ops, base + [str(2 * n)]) - instructions(ops, base + [str(n)])) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rev", default="main", help="the git revision to compare the working tree with (default main)")
    ap.add_argument("--quick", action="store_true", help="the bundled traces only, and fewer operations")
    ap.add_argument("--no-ops", action="store_true", help="replays only (no valgrind)")
    ap.add_argument("--tolerance", type=float, default=1.0, help="instruction increase allowed, in percent (default 1)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", help="build in this folder and keep it (default: a temporary one)")
    args = ap.parse_args()
    if not args.no_ops and not shutil.which("valgrind"):
        print("compare_trees: valgrind not found (apt-get install valgrind), or pass --no-ops", file=sys.stderr)
        return 2
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", args.rev], check=True, capture_output=True,
                             text=True).stdout.strip()
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()
    except subprocess.CalledProcessError as e:
        print("compare_trees: %s is not a git revision: %s" % (args.rev, e.stderr.strip()), file=sys.stderr)
        return 2
    print("# machine: %s, %d cores, %s" % (platform.processor() or platform.machine(), os.cpu_count() or 0,
                                           platform.platform()))
    print("# command: %s" % " ".join(sys.argv))
    print("# comparing %s (%s) with the working tree (HEAD %s)" % (args.rev, rev, head))
    work = args.keep or tempfile.mkdtemp(prefix="vram-compare-")
    try:
        old_src, new_src = os.path.join(work, "old"), os.path.join(work, "new")
        for d in (old_src, new_src):  # sources afresh (a file moved away must not linger); builds kept
            if os.path.isdir(d):
                shutil.rmtree(d)
        export_rev(args.rev, old_src)
        os.makedirs(new_src, exist_ok=True)
        export_tree(new_src)
        try:
            # (per revision: git archive's file times are the commit's, so a build of another
            # revision's objects could look newer than these sources)
            old_vram, old_ops = build(old_src, os.path.join(work, "build-" + rev), args.jobs)
            new_vram, new_ops = build(new_src, os.path.join(work, "build-new"), args.jobs)
        except subprocess.CalledProcessError as e:
            print("compare_trees: build failed: %s" % e, file=sys.stderr)
            return 2
        failed = 0
        rows = 0
        ts = [t for t in traces() if not args.quick or t.count("/") == 1]
        for device in ("sim", "cudasim"):
            for t in ts:
                a, b = replay_rows(old_vram, t, device), replay_rows(new_vram, t, device)
                rows += len(a) - 1
                same = a == b
                failed += not same
                print("replay %-7s %-45s %s (%d rows)" % (device, t, "identical" if same else "DIFFERENT", len(a) - 1))
                if not same:
                    for x, y in zip(a, b):
                        if x != y:
                            print("  - " + x[:400] + "\n  + " + y[:400])
            groups = {}
            for t in ts:
                groups.setdefault(os.path.dirname(t), []).append(t)
            for g, group in sorted(groups.items()):
                a, b = text_rows(old_vram, group, device), text_rows(new_vram, group, device)
                rows += len(a) - 1
                same = a == b
                failed += not same
                print("replay %-7s %-45s %s (text, %d lines)" % (device, g + "/ (together)", "identical" if same else "DIFFERENT",
                                                                len(a) - 1))
                if not same:
                    for x, y in zip(a, b):
                        if x != y:
                            print("  - " + x + "\n  + " + y)
        print("replay rows and lines compared: %d, comparisons differing: %d" % (rows, failed))
        if not args.no_ops:
            n = 20000 if args.quick else 100000
            loops = [(["pair", str(s)], "pair %d B" % s) for s in PAIR_SIZES] + [(["random"], "random")]
            for conf in CONFS:
                for loop, name in loops:
                    x, y = per_op(old_ops, "sim", conf, loop, n), per_op(new_ops, "sim", conf, loop, n)
                    change = (y - x) / x * 100 if x else 0.0
                    bad = change > args.tolerance  # fewer instructions is no failure
                    failed += bad
                    print("instructions %-28s %-10s %9.1f -> %9.1f per op (%+.2f%%)%s" %
                          (conf or "defaults", name, x, y, change, "  OVER TOLERANCE" if bad else ""))
        print("result: %s" % ("placement and instruction counts unchanged" if not failed else "%d differences" % failed))
        return 1 if failed else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

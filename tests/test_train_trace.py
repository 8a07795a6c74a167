#!/usr/bin/env python3
"""`vram train --trace PATH` (src/cli/train_trace.c), no GPU: the run's allocation stream written as
memtrace v1 replays to the run's own peaks (allocated and reserved, on the same host device and
configuration); every allocation is freed by the end; a run that runs out of memory still writes
its trace, which runs out of memory again when replayed under the same capacity and not under a
larger one; an unwritable path is one message, status 1 and no file; --trace with --ranks is
refused (status 2).

    python3 tests/test_train_trace.py VRAM_EXE CORPUS
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

VRAM, CORPUS = sys.argv[1], sys.argv[2]
SMALL = ["--data", CORPUS, "--layers", "2", "--width", "64", "--heads", "2", "--context", "32", "--threads", "1"]


def train(*args):
    return subprocess.run([VRAM, "train"] + SMALL + list(args), capture_output=True, text=True, timeout=300)


def replay(path, *args):
    p = subprocess.run([VRAM, "replay", "--json"] + list(args) + [path], capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return p.returncode, rows[0] if rows else {}, p.stderr


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "run.trace")
    p = train("--batch", "8", "--steps", "3", "--trace", path)
    m = re.search(r"peak allocated ([0-9.]+) MiB, peak reserved ([0-9.]+) MiB", p.stdout)
    check(p.returncode == 0 and m is not None, "a traced run: status %d\n%s" % (p.returncode, p.stderr[-500:]))
    with open(path) as f:
        text = f.read()
    lines = text.splitlines()
    check(lines[0] == "# memtrace v1" and any(line.startswith("# source: vram train ") for line in lines[:4]),
          "the header: %s" % lines[:4])
    allocs = sum(1 for line in lines if line.startswith("a "))
    frees = sum(1 for line in lines if line.startswith("f "))
    check(allocs > 100 and allocs == frees, "every allocation freed by the end: %d allocations, %d frees" % (allocs, frees))
    rc, row, err = replay(path, "--device", "host")
    check(rc == 0 and m is not None and abs(row.get("peak_allocated_bytes", -1) / 2 ** 20 - float(m.group(1))) < 0.006
          and abs(row.get("peak_reserved_bytes", -1) / 2 ** 20 - float(m.group(2))) < 0.006,
          "replayed on the host: the run's peaks %s, the replay's %s / %s (%s)" % (
              m.groups() if m else None, row.get("peak_allocated_bytes"), row.get("peak_reserved_bytes"), err[-300:]))
    header_peak = re.search(r"^# peak_requested_bytes: (\d+)$", text, re.M)
    check(header_peak is not None and int(header_peak.group(1)) == row.get("peak_requested_bytes"),
          "the header's peak_requested_bytes is the events' own")

    # out of memory: the trace up to the failure and the unwinding after it
    oom = os.path.join(d, "oom.trace")
    p = train("--batch", "64", "--steps", "2", "--capacity", "6MiB", "--trace", oom)
    check(p.returncode == 1 and "out of memory" in p.stderr and os.path.exists(oom),
          "an out-of-memory run writes its trace: status %d, file %s" % (p.returncode, os.path.exists(oom)))
    if os.path.exists(oom):
        with open(oom) as f:
            check("\n# oom: the run's request" in f.read(), "the failing request is marked in the trace")
        rc, row, err = replay(oom, "--device", "host:6MiB")
        check(rc == 1 and row.get("ooms", 0) >= 1, "replayed under the same capacity it runs out again: %d %s %s" % (
            rc, row.get("ooms"), err[-300:]))
        rc, row, err = replay(oom, "--device", "host")
        check(rc == 0 and row.get("ooms") == 0, "and fits in the whole host: %d %s" % (rc, err[-300:]))

    bad = os.path.join(d, "no-such-dir", "t.trace")
    p = train("--batch", "4", "--steps", "1", "--trace", bad)
    check(p.returncode == 1 and "--trace" in p.stderr and "Traceback" not in p.stderr and not os.path.exists(bad),
          "an unwritable path: status 1, one message: %d %s" % (p.returncode, p.stderr[-300:]))
    p = train("--ranks", "2", "--trace", path)
    check(p.returncode == 2 and "--trace records one process" in p.stderr, "--trace with --ranks: %d %s" % (
        p.returncode, p.stderr[-300:]))
sys.exit(done("test_train_trace"))

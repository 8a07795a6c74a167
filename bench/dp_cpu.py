#!/usr/bin/env python3
"""dp_cpu.py — data parallel `vram train` on the CPU under Open MPI (issue 44): prints the machine,
every command and a Markdown report (the losses of N ranks x batch b beside one process x N*b,
optimizer-state bytes per rank, communication, its hidden share and step times).

usage: bench/dp_cpu.py VRAM_BINARY CORPUS [--rounds R] [--steps S] [--out FILE.md]

Each configuration runs R times (default 3); a figure is the median over the rounds of each run's
median over its steps after the first. Open MPI runs as root only with OMPI_ALLOW_RUN_AS_ROOT
(set here), and on fewer cores than ranks with --oversubscribe.
"""
import argparse
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("vram")
ap.add_argument("corpus")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--out")
a = ap.parse_args()
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
COMMANDS = []


def run(cmd):
    COMMANDS.append(" ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=900)
    if p.returncode != 0:
        sys.exit("dp_cpu: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-1000:]))
    return p.stdout


def train(ranks, batch, extra):
    base = [a.vram, "train", "--data", a.corpus, "--steps", str(a.steps), "--log-every", "1", "--batch", str(batch)]
    if ranks == 0:
        return run(base + extra)
    return run(["mpirun", "-n", str(ranks), "--oversubscribe"] + base + extra + ["--dist", "mpi"])


def parse(out):
    r = {"losses": [float(x) for x in re.findall(r"^step +\d+/\d+ \| loss ([0-9.]+)", out, re.M)]}
    m = re.search(r"^summary: median step ([0-9.]+) ms", out, re.M)
    r["step"] = float(m.group(1)) if m else None
    m = re.search(r"^optimizer state: (\d+) bytes", out, re.M)
    r["opt"] = int(m.group(1)) if m else None
    m = re.search(r"compute ([0-9.]+) ms \+ exposed communication ([0-9.]+) ms; communication ([0-9.]+) ms, of it "
                  r"([0-9.]+) ms", out)
    if m:
        r["compute"], r["exposed"], r["comm"], r["hidden"] = map(float, m.groups())
    m = re.search(r"^  communication +(\d+)", out, re.M)
    r["comm_bytes"] = int(m.group(1)) if m else None
    m = re.search(r"(\d+) buckets? of up to", out)
    r["buckets"] = int(m.group(1)) if m else None
    return r


def med(rs, key):
    v = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(v) if v else None


def machine():
    cpu = ""
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, env=ENV).stdout.splitlines()
    load = os.getloadavg()[0]
    return "%s, %d online CPUs (load average %.1f at the start: shared with other work), %s, %s" % (
        cpu or platform.processor(), os.cpu_count(), load, platform.platform(), mpi[0] if mpi else "no mpirun")


lines = ["# Data parallel training on the CPU (issue 44)", "",
         "Date: %s. Machine: %s." % (datetime.date.today().isoformat(), machine()),
         "Command: `bench/dp_cpu.py %s %s --rounds %d --steps %d` (tiny GPT: 4 layers, width 128, context 64, "
         "0.87M parameters, AdamW unless said; ranks oversubscribed on the machine's cores)." % (
             a.vram, a.corpus, a.rounds, a.steps), ""]

# 1. losses: N ranks x b against one process x N*b
lines += ["## Losses: N ranks x batch b against one process x batch N*b", "",
          "| configuration | one process, loss at steps 1, 4, 8, last | N ranks, same steps | max difference |",
          "|---|---|---|---|"]
cases = [("DDP, 2 ranks x 4", 2, 4, []), ("DDP, 4 ranks x 2", 4, 2, []),
         ("DDP + accum 2, 2 ranks x 2", 2, 2, ["--accum", "2"]), ("DDP + accum 2, 4 ranks x 1", 4, 1, ["--accum", "2"]),
         ("ZeRO-1, 2 ranks x 4", 2, 4, ["--zero", "1"]), ("ZeRO-1, 4 ranks x 2", 4, 2, ["--zero", "1"]),
         ("ZeRO-1 momentum SGD, 4 ranks x 2", 4, 2, ["--zero", "1", "--optimizer", "momentum"])]
opt_rows = []
for name, n, b, extra in cases:
    single_extra = [x for x in extra if x not in ("--zero", "1")]
    one = parse(train(0, n * b, ["--bucket-mb", "0.5"] + single_extra))
    many = parse(train(n, b, ["--bucket-mb", "0.5"] + extra))
    pick = lambda ls: ", ".join("%.4f" % ls[i] for i in (0, 3, 7, len(ls) - 1) if i < len(ls))  # noqa: E731
    diff = max(abs(x - y) for x, y in zip(one["losses"], many["losses"])) if one["losses"] else float("nan")
    lines.append("| %s | %s | %s | %.4f |" % (name, pick(one["losses"]), pick(many["losses"]), diff))
    if "--zero" in extra:
        opt_rows.append((name, n, one["opt"], many["opt"], many["buckets"]))
lines += ["", "Losses are printed with 4 decimals; a difference of 0.0000 means equal to that precision over all %d "
          "steps. Batch b x accum k draws the same windows as batch k*b, so the accumulation rows follow the same "
          "trajectory as the rows without it, as they should." % a.steps, ""]

lines += ["## Optimizer-state bytes per rank (ZeRO-1)", "",
          "| configuration | one process | per rank | one process / N | buckets (0.5 MB) |", "|---|---|---|---|---|"]
for name, n, one_b, rank_b, nb in opt_rows:
    lines.append("| %s | %d | %d | %.0f | %s |" % (name, one_b, rank_b, one_b / n, nb))
lines.append("")

# 2. timing: communication, hidden share, step times
lines += ["## Step time, communication and its share hidden behind backward (medians of %d runs)" % a.rounds, "",
          "| configuration | step ms | compute ms | communication ms | hidden ms (share) | exposed ms | comm buffers B |",
          "|---|---|---|---|---|---|---|"]
timing = [("one process x 8", 0, 8, []), ("DDP 2 x 4, buckets 25 MB", 2, 4, []),
          ("DDP 2 x 4, buckets 0.5 MB", 2, 4, ["--bucket-mb", "0.5"]),
          ("DDP 2 x 4, buckets 0.1 MB", 2, 4, ["--bucket-mb", "0.1"]),
          ("ZeRO-1 2 x 4, buckets 0.5 MB", 2, 4, ["--bucket-mb", "0.5", "--zero", "1"]),
          ("DDP 4 x 2, buckets 0.5 MB", 4, 2, ["--bucket-mb", "0.5"])]
for name, n, b, extra in timing:
    rs = [parse(train(n, b, extra)) for _ in range(a.rounds)]
    comm, hidden = med(rs, "comm"), med(rs, "hidden")
    fmt = lambda v: "%.1f" % v if v is not None else "-"  # noqa: E731
    share = " (%.0f%%)" % (100 * hidden / comm) if comm else ""
    lines.append("| %s | %s | %s | %s | %s%s | %s | %s |" % (
        name, fmt(med(rs, "step")), fmt(med(rs, "compute")), fmt(comm), fmt(hidden), share, fmt(med(rs, "exposed")),
        rs[0]["comm_bytes"] if rs[0].get("comm_bytes") is not None else "-"))
out = train(4, 2, ["--bucket-mb", "0.5", "--zero", "1"])
table = out[out.find("Per rank"):].splitlines()
table = table[:next((i for i, l in enumerate(table) if l.startswith("optimizer state")), len(table))]
lines += ["", "## Memory by category per rank (ZeRO-1, 4 ranks x 2, buckets 0.5 MB)", "",
          "As `vram train` prints it at the end of a data parallel run (peak bytes of each allocator tag; "
          "\"communication\" is the buckets' flat buffers and ZeRO's chunks):", ""]
lines += ["    " + l for l in table]
lines += ["", "Communication: the union of the intervals from each bucket's start to its completion as first seen "
          "(MPI progresses when tested: at each gradient hook and in the final wait); hidden: its part before the "
          "end of backward; exposed: waiting after backward (ZeRO-1: and the parameters' all-gather). On 2 cores "
          "the ranks share the cores, so these are not scaling figures; on a machine shared with other work, "
          "N processes also get N shares of the cores where one process gets one, so step times of runs with "
          "different numbers of processes do not compare. The per-tag peaks above are the allocator's bytes as "
          "allocated (blocks rounded up); `opt state now` is the optimizer state's tensors as requested.", "",
          "Commands run:", ""]
for c in dict.fromkeys(COMMANDS):  # (in order, once each, with how often it ran)
    k = COMMANDS.count(c)
    lines.append("    " + c + ("    # x%d" % k if k > 1 else ""))
text = "\n".join(lines) + "\n"
print(text)
if a.out:
    with open(a.out, "w") as f:
        f.write(text)

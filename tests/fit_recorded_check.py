#!/usr/bin/env python3
"""fit_recorded_check.py — `python -m vram_torch fit`'s learning and search, offline, on the
streams four real programs recorded on an H100 (bench/results/2026-12-06-torchplan-run2/
fit_M_files: GPT-2, BERT with variable lengths, a Llama-style model, ResNet-50, each at batches 2
and 4 under PyTorch's allocator), against the real runs of those programs that the same benchmark
made (fit_M.json: "log", one row per run: batch, ran, peak allocated, peak reserved; "true_batch"
found by real doubling and bisection, capped as a GPU of the capacity would be).

Checked for each program: the learned stream's peak of live bytes at every batch that ran for
real above the recorded ones is within 2% of that run's peak allocated, and the batch the search
chooses (replays on vram's segments model, PyTorch's native placement, under the cap) is the true
largest batch or one below it (never above: that batch ran out of memory for real).

    python3 tests/fit_recorded_check.py VRAM_EXE
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, HERE)
from pycheck import check, done  # noqa: E402
from vram_torch import fit  # noqa: E402
from vram_torch.fit_run import CONF  # noqa: E402

RUN = os.path.join(REPO, "bench", "results", "2026-12-06-torchplan-run2")
VRAM = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("VRAM", "vram")
ROUND = 512  # PyTorch's allocated bytes are requests rounded to 512


def peak_live(model, batch):
    live, cur, peak = {}, 0, 0
    for e in model:
        if e[0] == "a":
            live[e[1]] = -(-(e[2] + e[3] * batch) // ROUND) * ROUND
            cur += live[e[1]]
            peak = max(peak, cur)
        else:
            cur -= live.pop(e[1])
    return peak


for name in ("gpt2", "bert", "llama", "resnet50"):
    with open(os.path.join(RUN, "fit_%s.json" % name)) as f:
        real = json.load(f)
    files = os.path.join(RUN, "fit_%s_files" % name)
    traces, sites = {}, {}
    for b in (2, 4):
        traces[b] = fit.load_trace(os.path.join(files, "b%d.trace" % b))
        with open(os.path.join(files, "b%d.trace.sites" % b)) as f:
            sites[b] = json.load(f)
    model = fit.learn(traces, lenient=True, sites=sites)
    errors = {}
    for batch, ran, peak_allocated in ((r[0], r[1], r[2]) for r in real["log"]):
        if ran and batch > 4:
            errors[batch] = peak_live(model, batch) / peak_allocated - 1
    worst = max(errors.values(), key=abs)
    check(errors and abs(worst) <= 0.02, "%s: the learned stream's peak within 2%% of the real runs' at %s: %s" % (
        name, sorted(errors), ", ".join("%d %+.2f%%" % (b, 100 * e) for b, e in sorted(errors.items()))))
    batch, res, replays = fit.search(model, real["capacity"], VRAM, "cudasim", 1 << 16, CONF["native"])
    true = real["true_batch"]
    check(true - 1 <= batch <= true, "%s at %.0f GiB: batch %d, the true largest %d (%d replays)" % (
        name, real["capacity"] / 2 ** 30, batch, true, replays))
    print("%-9s %5.1f GiB  true %3d  chosen %3d  peak error %+.2f%% .. %+.2f%%" % (
        name, real["capacity"] / 2 ** 30, true, batch, 100 * min(errors.values()), 100 * max(errors.values())))
sys.exit(done("fit_recorded_check"))

"""test_step_plan_early.py — early plans (vram_step_plan_config.early, docs/step_plan.md "Early
plans") on the six programs recorded on an H100 (bench/results/gpu-placement/traces), replayed by
bench_step_plan as the GPU ran them (placement_fidelity.py --write-traces puts the blocks an
earlier workload left at each trace's head):
- checkpointed GPT-2 and Llama training, whose peak best fit sets in the second step (the first
  with the optimizer's state), hold under 1.03 x peak requested at both lags with --early, where
  best fit and the plan without it hold 1.057-1.098;
- once the plan has begun, a warm step makes at most one driver call (the trace cut after two of
  its ten steps, by share of events, and replayed again);
- generation and inference on changing shapes, which never repeat a step, are unchanged;
- without --early the plan's figures are those of before (the option is off by default).
Usage: test_step_plan_early.py BENCH_STEP_PLAN_EXE VRAM_EXE REPO_ROOT"""
import os
import sys
import tempfile

bench_exe, vram, root = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402
from plan_bench import NAMES, gpu_traces, table as bench_table  # noqa: E402

names = NAMES


def table(args):
    """bench_step_plan's table: {trace name: [cells]}."""
    return bench_table(bench_exe, args)


with tempfile.TemporaryDirectory() as tmp:
    traces = gpu_traces(root, vram, tmp)
    # (vram, with an early plan) per device; the plan without --early as measured before
    want = {"cudasim": {"ckpt_gpt2": ("1.057", "1.023", "1.090"), "ckpt_llama": ("1.069", "1.022", "1.068")},
            "cudasim:lag=100": {"ckpt_gpt2": ("1.061", "1.016", "1.098"), "ckpt_llama": ("1.063", "1.024", "1.071")}}
    for dev, rows in want.items():
        early = table(["--early", "--device", dev] + traces)
        plain = table(["--device", dev] + traces)
        for n, (best_fit, with_early, without) in rows.items():
            r, q = early.get(n), plain.get(n)
            if check(r is not None and q is not None, "%s %s: rows" % (dev, n)):
                check(r[1] == best_fit and r[3] == with_early, "%s %s: vram %s, early plan %s (want %s, %s)"
                      % (dev, n, r[1], r[3], best_fit, with_early))
                check(float(r[3]) <= 1.03, "%s %s: early plan %s <= 1.03" % (dev, n, r[3]))
                check(q[3] == without, "%s %s: plan without --early %s (want %s)" % (dev, n, q[3], without))
        for n in names[2:]:
            r = early.get(n)
            if check(r is not None, "%s %s: a row" % (dev, n)):
                check(r[3] == r[1], "%s %s: unchanged by an early plan (%s vs %s)" % (dev, n, r[3], r[1]))

    # driver calls once warm: the trace cut after 2 of its 10 steps (share of events), replayed again
    for n in ("ckpt_gpt2", "ckpt_llama"):
        path = os.path.join(tmp, n + ".trace")
        with open(path) as f:
            lines = f.readlines()
        events = [i for i, l in enumerate(lines) if not l.startswith("#")]
        cut = os.path.join(tmp, n + "_warmup.trace")
        with open(cut, "w") as f:
            f.writelines(lines[:events[len(events) * 2 // 10]])
        for dev in ("cudasim", "cudasim:lag=100"):
            whole, head = table(["--early", "--device", dev, path]).get(n), table(["--early", "--device", dev, cut]).get(n + "_warmup")
            if check(whole is not None and head is not None, "%s %s: rows of the warm-up cut" % (dev, n)):
                per_step = (int(whole[4]) - int(head[4])) / 8.0
                check(per_step <= 1.0, "%s %s: %.1f driver calls a warm step with an early plan" % (dev, n, per_step))
sys.exit(done("test_step_plan_early"))

"""test_step_plan_layers.py — layer plans (VRAM_STEP_PLAN=layers: the step plan with periods from
16 requests, confirmed after 8, begun even above the peak so far; docs/step_plan.md "Layer
plans") on the six programs recorded on an H100 (bench/results/gpu-placement/traces), replayed by
bench_step_plan --min-period 16 --confirm 8 --may-raise-peak as the GPU ran them
(placement_fidelity.py --write-traces):
- generation, whose prefill repeats a layer: Llama 1.052 -> 1.044, GPT-2 1.044 -> 1.028 (1.027
  at the GPU's lag), both lags;
- checkpointed training planned with these settings holds more (GPT-2 1.057 -> 1.101): the preset
  is for generation; inference on changing shapes has no plan and is unchanged;
- without the options the plan's figures on generation are plain vram's (off by default).
Usage: test_step_plan_layers.py BENCH_STEP_PLAN_EXE VRAM_EXE REPO_ROOT"""
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


LAYERS = ["--min-period", "16", "--confirm", "8", "--may-raise-peak"]
with tempfile.TemporaryDirectory() as tmp:
    traces = gpu_traces(root, vram, tmp)
    # (vram, with layer plans) per device
    want = {"cudasim": {"gen_llama": ("1.052", "1.044"), "gen_gpt2": ("1.044", "1.028"),
                        "ckpt_gpt2": ("1.057", "1.101"), "ckpt_llama": ("1.069", "1.066")},
            "cudasim:lag=100": {"gen_llama": ("1.052", "1.044"), "gen_gpt2": ("1.044", "1.027"),
                                "ckpt_gpt2": ("1.061", "1.099"), "ckpt_llama": ("1.063", "1.068")}}
    for dev, rows in want.items():
        layers = table(LAYERS + ["--device", dev] + traces)
        plain = table(["--device", dev] + traces)
        for n, (best_fit, with_layers) in rows.items():
            r = layers.get(n)
            if check(r is not None, "%s %s: a row" % (dev, n)):
                check(r[1] == best_fit and r[3] == with_layers, "%s %s: vram %s, layer plans %s (want %s, %s)"
                      % (dev, n, r[1], r[3], best_fit, with_layers))
        for n in ("gen_llama", "gen_gpt2"):
            r, q = layers.get(n), plain.get(n)
            if check(r is not None and q is not None, "%s %s: rows" % (dev, n)):
                check(float(r[3]) <= 1.045 and int(r[8].split("/")[0]) >= 4 and int(r[9]) < 64,
                      "%s %s: a layer's plan (period %s) in each of the four calls takes it to %s <= 1.045"
                      % (dev, n, r[9], r[3]))
                check(q[3] == q[1], "%s %s: without the options no plan changes it (%s vs %s)" % (dev, n, q[3], q[1]))
        for n in ("infer_resnet50", "infer_convnext"):
            r = layers.get(n)
            if check(r is not None, "%s %s: a row" % (dev, n)):
                check(r[3] == r[1], "%s %s: no plan, unchanged (%s vs %s)" % (dev, n, r[3], r[1]))
sys.exit(done("test_step_plan_layers"))

"""test_step_plan_auto.py — auto plans (VRAM_STEP_PLAN=auto, vram_step_plan_config.auto_plan:
the kind of plan decided from the allocation stream; docs/step_plan.md "Auto"), replayed by
bench_step_plan --auto at cudasim's lag 0 and 100:
- the six programs recorded on an H100, as the GPU ran them (placement_fidelity.py
  --write-traces): checkpointed GPT-2 and Llama training take the early plan's figures (under
  1.03), Llama and GPT-2 generation a layer plan's (under 1.05), inference on changing shapes has
  no plan and places as plain vram does;
- the bundled traces where a preset holds more than plain vram (GPT-2 sampling and BERT under
  `layers`, ViT, GPT-2 and Llama training under `early`): auto makes no plan there, and places
  them exactly as plain vram does (ratio and driver calls);
- plain vram's own figures (the `vram` column: ratio and driver calls) are those of before, byte
  for byte: auto changes nothing unless asked for.
Usage: test_step_plan_auto.py BENCH_STEP_PLAN_EXE VRAM_EXE REPO_ROOT"""
import os
import sys
import tempfile

bench_exe, vram, root = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402
from plan_bench import gpu_traces, table  # noqa: E402

TARGET = {"ckpt_gpt2": 1.03, "ckpt_llama": 1.03, "gen_llama": 1.05, "gen_gpt2": 1.05}
# per device and trace: plain vram (ratio, driver calls), auto's ratio
WANT = {
    "cudasim": {"ckpt_gpt2": ("1.057", "414", "1.023"), "ckpt_llama": ("1.069", "539", "1.022"),
                "gen_llama": ("1.052", "130", "1.044"), "gen_gpt2": ("1.044", "207", "1.030"),
                "infer_resnet50": ("1.024", "233", "1.024"), "infer_convnext": ("1.048", "510", "1.048"),
                "gpt2_generate.gz": ("1.078", "198", "1.078"), "bert_varlen_train.gz": ("1.014", "1099", "1.014"),
                "vit_train.gz": ("1.023", "583", "1.023"), "gpt2_train.gz": ("1.018", "1149", "1.018"),
                "llama_train.gz": ("1.030", "793", "1.030")},
    "cudasim:lag=100": {"ckpt_gpt2": ("1.061", "421", "1.016"), "ckpt_llama": ("1.063", "755", "1.024"),
                        "gen_llama": ("1.052", "130", "1.044"), "gen_gpt2": ("1.044", "207", "1.028"),
                        "infer_resnet50": ("1.032", "403", "1.032"), "infer_convnext": ("1.043", "811", "1.043"),
                        "gpt2_generate.gz": ("1.078", "198", "1.078"),
                        "bert_varlen_train.gz": ("1.014", "1099", "1.014"), "vit_train.gz": ("1.019", "567", "1.019"),
                        "gpt2_train.gz": ("1.009", "1188", "1.009"), "llama_train.gz": ("1.048", "973", "1.048")}}
BUNDLED = ["traces/gpt2_generate.trace.gz", "traces/bert_varlen_train.trace.gz", "traces/unseen/vit_train.trace.gz",
           "traces/gpt2_train.trace.gz", "traces/unseen/llama_train.trace.gz"]

with tempfile.TemporaryDirectory() as tmp:
    traces = gpu_traces(root, vram, tmp) + [os.path.join(root, t) for t in BUNDLED]
    for dev, rows in WANT.items():
        auto = table(bench_exe, ["--auto", "--device", dev] + traces)
        for n, (plain, calls, with_auto) in rows.items():
            r = auto.get(n)
            if not check(r is not None, "%s %s: a row" % (dev, n)):
                continue
            check(r[1] == plain and r[2] == calls, "%s %s: plain vram %s with %s driver calls (want %s, %s)"
                  % (dev, n, r[1], r[2], plain, calls))
            check(r[3] == with_auto, "%s %s: auto %s (want %s)" % (dev, n, r[3], with_auto))
            if n in TARGET:
                check(float(r[3]) <= TARGET[n], "%s %s: auto %s <= %.2f" % (dev, n, r[3], TARGET[n]))
                kind = int(r[9]) >= 64 if n.startswith("ckpt") else int(r[9]) < 64
                check(kind and int(r[8].split("/")[0]) >= 1, "%s %s: %s plan begun (period %s, %s begun/retired)"
                      % (dev, n, "a whole step's" if n.startswith("ckpt") else "a layer's", r[9], r[8]))
            else:  # no plan begun: placed exactly as plain vram
                check(r[3] == r[1] and r[4] == r[2] and r[8] == "0/0",
                      "%s %s: no plan, as plain vram (%s with %s calls vs %s with %s; plans %s)"
                      % (dev, n, r[3], r[4], r[1], r[2], r[8]))


def one_process(paths, out):
    """The programs one after another as run_placement_gpu.sh runs them, in one process: a `#
    workload:` line before each (the replay empties the cache there, as the harness does), ids
    renumbered, and what a program leaves live freed before the next (its model goes)."""
    with open(out, "w") as f:
        f.write("# memtrace v1\n")
        base = 0
        for path in paths:
            f.write("# workload: %s\n" % os.path.basename(path).split(".")[0])
            live, top = set(), 0
            for line in open(path):
                if line.startswith("#"):
                    if line.startswith("# sync"):
                        f.write(line)
                    continue
                w = line.split()
                i = int(w[1])
                top = max(top, i + 1)
                (live.add if w[0] == "a" else live.discard)(i)
                w[1] = str(base + i)
                f.write(" ".join(w) + "\n")
            for i in sorted(live):
                f.write("f %d\n" % (base + i))
            base += top
    return out


# A program run after another in the same process plans as it does alone: empty_cache forgets the
# history, so an early plan's first step is the program's own (on the H100 checkpointed Llama after
# checkpointed GPT-2 held 1.066 with VRAM_STEP_PLAN=early before it did).
with tempfile.TemporaryDirectory() as tmp:
    ckpt = gpu_traces(root, vram, tmp, ["ckpt_gpt2", "ckpt_llama"])
    both = one_process(ckpt, os.path.join(tmp, "both.trace"))
    for flag in ("--auto", "--early"):
        rows = table(bench_exe, [flag, "--device", "cudasim", both])
        for n, want in (("ckpt_gpt2", "1.023"), ("ckpt_llama", "1.022")):
            r = rows.get("both: " + n)
            check(r is not None and r[3] == want, "%s, %s after the other in one process: %s (want %s, as alone)"
                  % (flag, n, r[3] if r else "no row", want))

sys.exit(done("test_step_plan_auto"))

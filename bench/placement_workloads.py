"""placement_workloads.py — the three kinds of program of issue 46, two of each, run unchanged
under whichever allocator the process has (PyTorch's own, or vram under `python -m vram_torch
run`), measuring peak reserved / peak requested, step time and the outputs.

    python bench/placement_workloads.py [--workloads a,b,...] [--out FILE.json] [--trace-dir DIR]
    python -m vram_torch run bench/placement_workloads.py ...        (the same under vram)
    python bench/placement_workloads.py --report A.json B.json ...    (a markdown table)

Workloads (random weights from configs, no downloads, every seed fixed, so that the same
allocation stream and the same outputs come under every allocator):
  ckpt_gpt2      HF GPT-2 124M, gradient_checkpointing_enable(), batch 8 x 1024, bf16 autocast, AdamW
  ckpt_llama     HF Llama (12 layers, width 1024, GQA 16/4 heads), gradient checkpointing,
                 batch 4 x 2048, bf16 autocast, AdamW
  gen_llama      HF Llama (8 layers, width 1024, bf16 weights) sampling 48 tokens per call for a
                 batch of random size 1..24 and a random prompt length 16..512 (HF KV cache)
  gen_gpt2       HF GPT-2 124M (fp32) sampling 48 tokens, batch 1..32, prompt 16..384
  infer_resnet50 torchvision ResNet-50, no_grad, fp32; a step is six batches of random size 1..64
                 at a random resolution of 160..320 (multiples of 32)
  infer_convnext timm ConvNeXt-Tiny, no_grad, bf16 autocast; as infer_resnet50
A step's output is its loss (training), the sampled tokens (generation; also their checksum), or
a checksum of the logits (inference). The report compares them with native's first round: the
share of equal tokens for generation (bf16 Llama samples differently from run to run even under
native, so its native row's "run to run" figure is the floor to compare with), the largest
difference otherwise; each allocator's step time against native's per round, with the rounds'
own figures (their spread on a shared machine is wider than the effects measured).

Between workloads the cache is emptied and the peaks reset (torch.cuda.empty_cache,
reset_peak_memory_stats, which vram_torch answers under vram). --trace-dir (PyTorch's allocator
only) records each workload's allocation stream with torch.cuda.memory._record_memory_history and
writes DIR/NAME.trace (memtrace v1, PyTorch's peaks for that workload in the header), as
`python -m vram_torch record` does for a whole program, with the blocks live when the workload
began (the workloads before it left cuBLAS's workspaces, which count in its peaks) allocated at
its head and a `# sync: step K` line where each step begins; a recording run's step times are
not comparable (the history costs time).
"""
import argparse
import gc
import json
import os
import random
import statistics
import sys
import time

WORKLOADS = ["ckpt_gpt2", "ckpt_llama", "gen_llama", "gen_gpt2", "infer_resnet50", "infer_convnext"]
STEPS = {"ckpt": 10, "gen": 4, "infer": 6}  # by kind; the first step(s) are warm-up
WARMUP = {"ckpt": 2, "gen": 1, "infer": 1}


def kind_of(name):
    return name.split("_")[0]


def checkpointed(torch, model, vocab, shape, seed):
    """step() of AdamW training with HF gradient checkpointing, bf16 autocast, random tokens."""
    model = model.to("cuda")
    model.gradient_checkpointing_enable()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(seed)
    return train_step(torch, model, opt, lambda: torch.randint(0, vocab, shape, generator=g).to("cuda"))


def train_step(torch, model, opt, make_ids):
    def step():
        ids = make_ids()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()
    return step


def generate_step(torch, model, vocab, max_batch, max_prompt, eos):
    rng = random.Random(5)
    count = [0]

    def step():
        b, n = rng.randint(1, max_batch), rng.randint(16, max_prompt)
        g = torch.Generator().manual_seed(1000 + count[0])
        prompt = torch.randint(0, vocab, (b, n), generator=g).cuda()
        torch.manual_seed(100 + count[0])
        count[0] += 1
        with torch.no_grad():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True, top_k=50,
                                 max_new_tokens=48, min_new_tokens=48, pad_token_id=eos, use_cache=True)
        checksum = float(out[:, n:].sum().item())
        # the tokens themselves for the comparison, copied whole (a contiguous tensor: no device
        # allocation, so the allocation stream stays the one recorded) and cut on the host
        return {"output": checksum, "tokens": out.cpu()[:, n:].flatten().tolist()}
    return step


def infer_step(torch, model, autocast):
    rng = random.Random(7)

    def step():
        total = 0.0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            for _ in range(6):
                b, r = rng.randint(1, 64), 32 * rng.randint(5, 10)
                x = torch.randn(b, 3, r, r, device="cuda")
                total += float(model(x).float().sum().item())
        return total
    return step


def build(name, torch):
    """step() -> float for workload `name`, its seeds fixed."""
    torch.manual_seed(0)
    dev = "cuda"
    if name == "ckpt_gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        return checkpointed(torch, GPT2LMHeadModel(GPT2Config(use_cache=False)), 50257, (8, 1024), 2)
    if name == "ckpt_llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=12, num_attention_heads=16,
                          num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, use_cache=False)
        return checkpointed(torch, LlamaForCausalLM(cfg), 32000, (4, 2048), 3)
    if name == "gen_llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                          num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024,
                          bos_token_id=1, eos_token_id=2)
        model = LlamaForCausalLM(cfg).to(dev, dtype=torch.bfloat16).eval()
        return generate_step(torch, model, 32000, 24, 512, 2)
    if name == "gen_gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        model = GPT2LMHeadModel(GPT2Config()).to(dev).eval()
        return generate_step(torch, model, 50257, 32, 384, 50256)
    if name == "infer_resnet50":
        import torchvision
        model = torchvision.models.resnet50().to(dev).eval()
        return infer_step(torch, model, False)
    if name == "infer_convnext":
        import timm
        model = timm.create_model("convnext_tiny", pretrained=False).to(dev).eval()
        return infer_step(torch, model, True)
    raise SystemExit("placement_workloads.py: no workload %r (one of %s)" % (name, ", ".join(WORKLOADS)))


def ring_length(torch):
    """How many entries PyTorch's trace ring of device 0 holds now."""
    traces = torch.cuda.memory._snapshot().get("device_traces") or [[]]
    return len(traces[0])


def live_blocks(torch):
    """(address, requested size, stream) of every block allocated now: what the workloads before
    this one left behind (cuBLAS's workspaces, 66 MiB on an H100), which counts in this
    workload's peaks on the GPU and so goes at the head of its trace."""
    blocks = []
    for seg in torch.cuda.memory._snapshot().get("segments", []):
        if seg.get("device", 0) != 0:
            continue
        addr = seg["address"]
        for b in seg.get("blocks", []):
            if b.get("state") == "active_allocated":
                blocks.append((addr, int(b.get("requested_size") or b["size"]), int(seg.get("stream", 0))))
            addr += b["size"]
    return blocks


def write_trace(torch, path, name, peaks, start, live=(), marks=None):
    """This workload's entries of PyTorch's trace ring (those from `start` on) as memtrace v1, the
    blocks `live` at its start allocated first, a "# sync: step K" line where each step began."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from vram_torch.record import convert
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    entries = (snap.get("device_traces") or [[]])[0][start:]
    header = {"source": "PyTorch %s (CUDA %s), bench/placement_workloads.py --workloads %s, %s, %s" % (
                  torch.__version__.split("+")[0], torch.version.cuda, name, torch.cuda.get_device_name(0),
                  time.strftime("%Y-%m-%d")),
              "pytorch_native_peak_allocated_bytes": peaks[0], "pytorch_native_peak_reserved_bytes": peaks[1],
              "live_at_start_bytes": sum(size for _, size, _ in live)}
    with open(path, "w") as f:
        n, peak, skipped = convert(entries, f, header, marks, live)
    print("trace: %s (%d allocations, peak requested %d, %d frees of earlier allocations skipped)"
          % (path, n, peak, skipped), flush=True)


def step_plan_stats(allocator):
    """The step plan's counters on device 0 under VRAM_STEP_PLAN=1 (src/torch/plan_route.cpp), or None."""
    if "+plan" not in allocator:
        return None
    import ctypes
    lib = sys.modules["vram_torch"]._load()
    out = (ctypes.c_ulonglong * 11)()
    if lib.vram_torch_step_plan_stats(0, out) != 0:
        return None
    keys = ("requests", "served", "missed", "plans_begun", "plans_retired", "last_period", "last_planned",
            "last_arena_bytes", "last_floor_bytes", "arena_bytes", "arena_live_bytes")
    return dict(zip(keys, out))


def run_one(torch, name, allocator, trace_dir):
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start, live, marks = 0, [], {}
    if trace_dir:  # (whether turning the history off clears the ring differs between versions)
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=1 << 23)
        start = ring_length(torch)
        live = live_blocks(torch)
    step = build(name, torch)
    n = STEPS[kind_of(name)]
    outputs, tokens, times = [], [], []
    for k in range(n):
        torch.cuda.synchronize()
        if trace_dir:  # where each step begins, for replays that measure steps (placement_steady.py)
            marks[ring_length(torch) - start] = ["# sync: step %d" % k]
        t0 = time.perf_counter()
        out = step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if isinstance(out, dict):
            tokens.append(out["tokens"])
            out = out["output"]
        outputs.append(out)
    stats = torch.cuda.memory_stats()
    r = {"workload": name, "allocator": allocator, "outputs": outputs, "step_times_s": times,
         "warmup": WARMUP[kind_of(name)],
         "peak_reserved": stats.get("reserved_bytes.all.peak", 0),
         "peak_requested": stats.get("requested_bytes.all.peak", 0),
         "peak_allocated": stats.get("allocated_bytes.all.peak", 0)}
    r["ratio"] = r["peak_reserved"] / r["peak_requested"] if r["peak_requested"] else None
    if tokens:
        r["tokens"] = tokens
    plan = step_plan_stats(allocator)
    if plan:  # the allocator counts the plan's arena as one block: its requested bytes are not the program's
        r["step_plan"] = plan
        r["ratio"] = None
    if trace_dir:
        write_trace(torch, os.path.join(trace_dir, name + ".trace"), name,
                    (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()), start, live, marks)
    print(json.dumps({k: v for k, v in r.items() if k not in ("step_times_s", "tokens")}), flush=True)
    del step
    return r


def run(names, out, trace_dir):
    import torch
    vram = "vram_torch" in sys.modules and sys.modules["vram_torch"].is_enabled()
    conf = os.environ.get("VRAM_ALLOC_CONF", "")
    label = {"1": "vram+plan", "early": "vram+plan+early", "layers": "vram+plan+layers",
             "auto": "vram+plan+auto"}.get(os.environ.get("VRAM_STEP_PLAN", ""), "vram")
    allocator = (label + ":" + conf if conf else label) if vram else ("expandable" if "expandable_segments:true" in
                                     os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "").lower() else "native")
    if trace_dir and vram:
        raise SystemExit("placement_workloads.py: --trace-dir records PyTorch's own allocator's history; run it without vram")
    torch.backends.cudnn.benchmark = False
    results = [run_one(torch, name, allocator, trace_dir) for name in names]
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "alloc_conf": os.environ.get("VRAM_ALLOC_CONF", ""),
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    if out:
        with open(out, "w") as f:
            json.dump({"info": info, "results": results}, f)


def agreement(ref, rs):
    """How the runs rs's outputs compare with the run ref's: "identical", the share of sampled
    tokens equal position by position (generation, whose token-id checksums say nothing about how
    close two runs are), or the largest difference of the per-step outputs (loss, logits sum)."""
    if ref.get("tokens") and all(r.get("tokens") for r in rs):
        equal = total = 0
        for r in rs:
            for a, b in zip(ref["tokens"], r["tokens"]):
                total += max(len(a), len(b))
                equal += sum(x == y for x, y in zip(a, b))
        return "identical" if equal == total else "%.1f%% of tokens equal" % (100.0 * equal / total)
    diff = max(max(abs(x - y) for x, y in zip(ref["outputs"], r["outputs"])) for r in rs)
    return "identical" if diff == 0 else "max diff %.3g" % diff


def report(files):
    """Per workload and allocator over its rounds: the ratio's range, the median step time after
    warm-up, the median over rounds of (per-step median of this run's step over native's same step
    in the native run of the same round) with each round's figure, and the outputs against native's
    first round (native's own row: its other rounds against its first, the run-to-run spread)."""
    runs = {}  # (workload, allocator) -> [result per round]
    info = None
    for path in files:
        d = json.load(open(path))
        info = d["info"]
        for r in d["results"]:
            runs.setdefault((r["workload"], r["allocator"]), []).append(r)
    print("GPU: %s, PyTorch %s, CUDA %s, %s; %s\n" % (info["gpu"], info["torch"], info["cuda"], info["date"],
                                                     ", ".join(sorted(set(files)))))
    print("| workload | allocator | rounds | peak requested | peak reserved | reserved / requested | step time (median) "
          "| vs native (rounds) | outputs vs native's first round |")
    print("|---|---|---|---|---|---|---|---|---|")
    allocators = sorted({a for (_, a) in runs}, key=lambda a: (a != "native", a))
    for w in WORKLOADS:
        natives = runs.get((w, "native"), [])
        for a in allocators:
            rs = runs.get((w, a))
            if not rs:
                continue
            # under a step plan the allocator's requested bytes count its arena whole: the program's
            # own peak requested is native's in the same round (the same program, the same requests)
            ratios = [r["ratio"] or (r["peak_reserved"] / nr["peak_requested"] if nr and nr["peak_requested"] else None)
                      for r, nr in zip(rs, natives + [None] * len(rs))]
            ratios = [x for x in ratios if x]
            skip = rs[0]["warmup"]
            st = statistics.median(t for r in rs for t in r["step_times_s"][skip:])
            rel = "-"
            if natives and a != "native":
                per_round = [statistics.median(t / b for t, b in zip(r["step_times_s"][skip:], nr["step_times_s"][skip:]))
                             for r, nr in zip(rs, natives)]
                rel = "%+.1f%% (%s)" % (100 * (statistics.median(per_round) - 1),
                                        ", ".join("%+.0f%%" % (100 * (x - 1)) for x in per_round))
            same = "-"
            if natives:
                others = rs if a != "native" else rs[1:]
                same = agreement(natives[0], others) if others else "one round"
                if a == "native" and others:
                    same = "run to run: " + same
            plans = [r["step_plan"] for r in rs if "step_plan" in r]
            if plans:
                same += "; plan served %d of %d" % (plans[-1]["served"], plans[-1]["requests"])
            ratio = "-" if not ratios else "%.3f" % ratios[0] if len(set(ratios)) == 1 else "%.3f–%.3f" % (
                min(ratios), max(ratios))
            requested = [r["peak_requested"] for r in rs if "step_plan" not in r] or [
                nr["peak_requested"] for nr in natives] or [0]
            print("| %s | %s | %d | %.3f GiB | %.3f GiB | %s | %.1f ms | %s | %s |" % (
                w, a, len(rs), statistics.median(requested) / 2 ** 30,
                statistics.median(r["peak_reserved"] for r in rs) / 2 ** 30, ratio, 1000 * st, rel, same))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--out")
    p.add_argument("--trace-dir")
    p.add_argument("--report", nargs="+")
    a = p.parse_args()
    if a.report:
        return report(a.report)
    names = [w for w in a.workloads.split(",") if w]
    bad = [w for w in names if w not in WORKLOADS]
    if bad:
        raise SystemExit("placement_workloads.py: unknown workload(s) %s (known: %s)" % (", ".join(bad), ", ".join(WORKLOADS)))
    if a.trace_dir:
        os.makedirs(a.trace_dir, exist_ok=True)
    run(names, a.out, a.trace_dir)


if __name__ == "__main__":
    main()

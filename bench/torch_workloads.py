"""torch_workloads.py — the four PyTorch programs behind the bundled traces, run for a few
steps under one allocator, measuring what a user sees.

    python bench/torch_workloads.py --alloc vram|vram:CONF|native|expandable [--steps N] [--cap-bytes B]
                                    [--deterministic] [--compile MODE] [--trace FILE] [--out FILE.json]
    python bench/torch_workloads.py --report A.json B.json ...      (a markdown table)

Workloads (random weights, no downloads, same seeds under every allocator):
  resnet50_train   torchvision ResNet-50, batch 64, fp32, SGD with momentum
  gpt2_train       GPT-2 124M (transformers GPT2LMHeadModel from a config), batch 8 x 1024,
                   bf16 autocast, AdamW
  bert_varlen      BERT-base masked LM, batch 32, a random sequence length 16..512 each step,
                   AdamW
  gpt2_generate    GPT-2 124M sampling 384 tokens for 16 sequences with the KV cache
and, named with --workloads, the four of bench/extra_workloads.py that the allocator was never
tuned on: vit_train, llama_train, t5_varlen_train, effnet_infer.

The allocator is chosen before torch touches CUDA: vram through vram_torch.enable(), PyTorch's
expandable segments through PYTORCH_CUDA_ALLOC_CONF; `vram:CONF` runs vram with VRAM_ALLOC_CONF=CONF
(e.g. vram:reserve_slack:0.02). KIND#N (native#3, vram#2) is a repeated run of KIND under its own
label, for run-to-run spreads: the report compares the losses of every native run (native,
native2, native#N) pairwise, and every other run of an allocator with every native run. Per workload it records the losses (for
generation: a checksum of the sampled tokens), the mean step time after the warm-up step(s) (two for training, one for generation; the
BERT steps differ in length, but the lengths are the same under every allocator), the
allocator's peak reserved and peak requested bytes (memory_stats of PyTorch or of
vram_torch), and the device memory in use as cudaMemGetInfo reports it, sampled after every
step, above what was in use before the workload started.

--cap-bytes B limits the allocator to B bytes of reserved memory, as a GPU of that size would
(torch.cuda.set_per_process_memory_fraction(B / total), which vram_torch routes to vram): a
workload that runs out of memory is recorded with "oom": true and the step it failed in.

--deterministic runs PyTorch's deterministic kernels (torch.use_deterministic_algorithms, cuBLAS
with a fixed workspace, attention through the math kernels; slower and with other peaks), so that losses that differ between allocators cannot be the kernels'
own run-to-run noise (GPT-2's bf16 training differs between two native runs otherwise).

--compile MODE runs the three training workloads' models through torch.compile(model, mode=MODE)
(generation stays eager): with MODE reduce-overhead, Inductor's CUDA graph trees, whose pool
calls and checkpoint restores vram_torch answers (docs/pytorch.md); BERT's new sequence length
every step makes new recordings after replays, each a restore. Under vram the record gains the
restores' counts (vram_torch.graph_trees.COUNTS).

--trace FILE (vram only) writes the allocation stream vram served in the whole run as memtrace v1
(its history, converted as python/vram_torch/record.py does), with a line "# workload: NAME" where
each workload begins (the workloads share one process, so what one leaves allocated, cuBLAS
workspaces, shapes the next one's placement, which a recording of one workload alone lacks) and a
line "# sync: NAME step N" after each step's torch.cuda.synchronize(), where all GPU work queued
so far had finished.
"""
import argparse
import json
import os
import statistics
import sys
import time

WORKLOADS = ["resnet50_train", "gpt2_train", "bert_varlen", "gpt2_generate"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extra_workloads  # noqa: E402  (imports torch only when a workload is built)
KINDS = ["native", "native2", "expandable", "vram", "vram_segments", "vram_p20"]  # and vram:CONF


def base_kind(kind):
    """The allocator a run label names: native2 and native#N are native, vram#N is vram."""
    kind = kind.split("#")[0]
    return "native" if kind == "native2" else kind


def setup_allocator(kind):
    kind = base_kind(kind)
    if kind == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    elif kind == "vram_segments":
        os.environ["VRAM_ALLOC_CONF"] = "expandable_segments:False"
    elif kind == "vram_p20":
        os.environ["VRAM_ALLOC_CONF"] = "page_size_mb:20"
    elif kind.startswith("vram:"):
        os.environ["VRAM_ALLOC_CONF"] = kind[len("vram:"):]
    elif kind == "native":
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    import torch
    if kind.startswith("vram"):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        import vram_torch
        vram_torch.enable()
        return torch, vram_torch
    return torch, torch.cuda


def build(name, torch, compile_mode=None):
    """Returns step() -> float (loss or checksum) for the workload, all state captured; with
    compile_mode, a training workload's model runs through torch.compile(mode=compile_mode)."""
    import random

    def compiled(model):
        return torch.compile(model, mode=compile_mode) if compile_mode else model
    torch.manual_seed(0)
    random.seed(0)
    dev = "cuda"
    if name == "resnet50_train":
        import torchvision
        model = torchvision.models.resnet50().to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        model = compiled(model)
        g = torch.Generator().manual_seed(1)
        x_cpu = torch.randn(64, 3, 224, 224, generator=g)
        y_cpu = torch.randint(0, 1000, (64,), generator=g)
        lossf = torch.nn.CrossEntropyLoss()

        def step():
            x, y = x_cpu.to(dev), y_cpu.to(dev)
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()
        return step
    if name in ("gpt2_train", "gpt2_generate"):
        from transformers import GPT2Config, GPT2LMHeadModel
        model = GPT2LMHeadModel(GPT2Config()).to(dev)
        g = torch.Generator().manual_seed(2)
        if name == "gpt2_train":
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            model = compiled(model)
            ids_cpu = torch.randint(0, 50257, (8, 1024), generator=g)

            def step():
                ids = ids_cpu.to(dev)
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                return loss.item()
            return step
        model.eval()
        prompt_cpu = torch.randint(0, 50257, (16, 16), generator=g)
        count = [0]

        def step():
            torch.manual_seed(100 + count[0])
            count[0] += 1
            with torch.no_grad():
                out = model.generate(prompt_cpu.to(dev), attention_mask=torch.ones_like(prompt_cpu).to(dev),
                                     do_sample=True, top_k=50, max_new_tokens=384, min_new_tokens=384,
                                     pad_token_id=50256, use_cache=True)
            return float(out[:, 16:].sum().item())
        return step
    if name == "bert_varlen":
        from transformers import BertConfig, BertForMaskedLM
        model = BertForMaskedLM(BertConfig()).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        model = compiled(model)
        rng = random.Random(3)
        g = torch.Generator().manual_seed(3)

        def step():
            n = rng.randint(16, 512)
            ids = torch.randint(0, 30522, (32, n), generator=g).to(dev)
            opt.zero_grad(set_to_none=True)
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            return loss.item()
        return step
    return extra_workloads.build(name)


def write_trace(mem, torch, path, names, marks):
    """Writes vram's history since record_memory_history as memtrace v1, with the lines of
    `marks` ((history count, "# ..." line) pairs) before the events recorded after them."""
    from vram_torch.record import convert
    events = mem.snapshot()["device_traces"][0]
    first = mem.history_count() - len(events)  # the count of events[0] (the ring keeps the last ones)
    by_index = {}
    for count, line in marks:
        if count >= first:
            by_index.setdefault(count - first, []).append(line)
    mem.record_memory_history(None)
    with open(path, "w") as f:
        header = {"source": "vram_torch history, program bench/torch_workloads.py --workloads %s, %s, %s"
                            % (",".join(names), torch.cuda.get_device_name(0), time.strftime("%Y-%m-%d"))}
        n, peak, skipped = convert(events, f, header, marks=by_index)
    print("trace: %s (%d allocations, %d frees of earlier allocations skipped)" % (path, n, skipped), flush=True)


def run(kind, steps, workloads, cap_bytes=0, deterministic=False, trace=None, compile_mode=None):
    if deterministic:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # before CUDA starts
    torch, mem = setup_allocator(kind)
    if deterministic:  # (attention through the math kernels: flash, memory-efficient and cuDNN backward are not deterministic)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        torch.backends.cuda.enable_cudnn_sdp(False)
    if cap_bytes:
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / torch.cuda.mem_get_info()[1]))
    import gc
    torch.backends.cudnn.benchmark = False
    results, marks = [], []  # marks: (history count, trace line) for --trace
    if trace:
        mem.record_memory_history("all", max_entries=1 << 24)
    for name in workloads:
        if trace:
            marks.append((mem.history_count(), "# workload: " + name))
        gc.collect()
        mem.empty_cache()
        torch.cuda.synchronize()
        free0, total = torch.cuda.mem_get_info()
        if not kind.startswith("vram") or mem.is_enabled():
            try:
                mem.reset_peak_memory_stats()
            except RuntimeError:
                pass
        n = steps if name != "gpt2_generate" else max(3, steps // 3)
        t_build = time.perf_counter()
        step = build(name, torch, compile_mode if name != "gpt2_generate" else None)
        if compile_mode and kind.startswith("vram"):
            from vram_torch import graph_trees
            counts0 = dict(graph_trees.COUNTS)
        losses, times, used_peak, calls, oom_step = [], [], 0, [], None
        before = mem.memory_stats()
        for i in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            try:
                losses.append(step())
            except torch.OutOfMemoryError:
                oom_step = i
                break
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            if trace:  # the GPU's work so far is done here: a replay can complete its streams
                marks.append((mem.history_count(), "# sync: %s step %d" % (name, i)))
            free, _ = torch.cuda.mem_get_info()
            used_peak = max(used_peak, free0 - free)
            after = mem.memory_stats()  # device calls (maps + unmaps, or cudaMalloc + cudaFree) this step
            calls.append(sum(after.get(k, 0) - before.get(k, 0) for k in ("num_device_alloc", "num_device_free")))
            before = after
        stats = mem.memory_stats()
        r = {
            "workload": name, "allocator": kind, "steps": n, "losses": losses,
            "cap_bytes": cap_bytes, "deterministic": deterministic, "oom": oom_step is not None, "oom_step": oom_step,
            "compile": compile_mode if name != "gpt2_generate" else None,
            "step_time_s": statistics.mean(times[2:] if len(times) > 3 else times[1:]) if len(times) > 1 else None,
            "step_times_s": times,
            "device_calls_per_step": calls,
            "peak_reserved": stats.get("reserved_bytes.all.peak", 0),
            "peak_requested": stats.get("requested_bytes.all.peak", 0),
            "peak_allocated": stats.get("allocated_bytes.all.peak", 0),
            "num_device_alloc": stats.get("num_device_alloc", 0),
            "num_device_free": stats.get("num_device_free", 0),
            "num_sync_all_streams": stats.get("num_sync_all_streams", 0),
            "num_alloc_retries": stats.get("num_alloc_retries", 0),
            "device_used_peak": used_peak,
            "build_and_run_s": time.perf_counter() - t_build,
        }
        r["reserved_over_requested"] = r["peak_reserved"] / r["peak_requested"] if r["peak_requested"] else None
        if compile_mode and kind.startswith("vram"):
            r["graph_trees"] = {k: v - counts0[k] for k, v in graph_trees.COUNTS.items()}
        print(json.dumps({k: v for k, v in r.items() if k != "step_times_s"}), flush=True)
        results.append(r)
        del step
    if trace:
        write_trace(mem, torch, trace, workloads, marks)
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    return {"info": info, "results": results}


def report(files):
    runs = {}
    info = None
    for f in files:
        d = json.load(open(f))
        info = d["info"]
        for r in d["results"]:
            t = r["step_times_s"]
            r["step_time_s"] = statistics.mean(t[2:] if len(t) > 3 else t[1:])
            runs[(r["workload"], r["allocator"])] = r
    kinds = [k for k in KINDS if any(a == k for (_, a) in runs)]
    kinds += sorted({a for (_, a) in runs if a not in KINDS})
    workloads = [w for w in WORKLOADS + list(extra_workloads.WORKLOADS) if any(x == w for (x, _) in runs)]
    gib = 1024 ** 3
    print("GPU: %s, PyTorch %s, CUDA %s, %s\n" % (info["gpu"], info["torch"], info["cuda"], info["date"]))
    modes = sorted({str(r.get("compile")) for r in runs.values() if r.get("compile")})
    if modes:
        print("Models of the training workloads compiled with torch.compile(mode=%s).\n" % ", ".join(modes))
    print("Step time: mean after the warm-up steps. vs native: the median over those steps of this run's step time")
    print("over native's same step (BERT's steps differ in length, the same under every allocator), so one slow step")
    print("or a slow stretch of the machine moves it less than a ratio of means; native2 shows native's own spread.\n")
    print("| workload | allocator | peak requested | peak reserved | reserved / requested | device used (cudaMemGetInfo) "
          "| step time | vs native | losses (first, last) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w in workloads:
        base = runs.get((w, "native"))
        for k in kinds:
            r = runs.get((w, k))
            if not r:
                continue
            rel = "-"
            if base:
                skip = 2 if len(r["step_times_s"]) > 3 else 1
                ratios = [t / b for t, b in zip(r["step_times_s"][skip:], base["step_times_s"][skip:])]
                rel = "%+.1f%%" % (100 * (statistics.median(ratios) - 1)) if ratios else "-"
            print("| %s | %s | %.2f GiB | %.2f GiB | %.3f | %.2f GiB | %.1f ms | %s | %.6g, %.6g |" % (
                w, k, r["peak_requested"] / gib, r["peak_reserved"] / gib, r["reserved_over_requested"] or 0,
                r["device_used_peak"] / gib, 1000 * r["step_time_s"], rel, r["losses"][0], r["losses"][-1]))
    print()
    for w in workloads:
        for k in kinds:
            r = runs.get((w, k))
            if r and k.startswith("vram"):
                print("%s %s: %d steps, device maps/allocs %d, unmaps/frees %d, stream syncs %d, OOM retries %d%s" % (
                    w, k, r["steps"], r.get("num_device_alloc", 0), r.get("num_device_free", 0),
                    r.get("num_sync_all_streams", 0), r.get("num_alloc_retries", 0),
                    "; device calls per step " + " ".join(map(str, r["device_calls_per_step"]))
                    if "device_calls_per_step" in r else ""))
                if r.get("graph_trees"):
                    print("%s %s: CUDA graph trees: %d checkpoint restores, %d blocks recreated, %d storages adopted"
                          % (w, k, r["graph_trees"]["restores"], r["graph_trees"]["recreated"],
                             r["graph_trees"]["adopted"]))
    print()
    for w in workloads:
        ls = {k: runs[(w, k)]["losses"] for k in kinds if (w, k) in runs}
        if "native" not in ls:
            continue
        natives = [v for k, v in ls.items() if base_kind(k) == "native"]
        if len(natives) > 1:
            spreads = [max_diff(a, b) for i, a in enumerate(natives) for b in natives[i + 1:]]
            spread = "%.3g" % max(spreads)
            if len(spreads) > 1:
                spread += " (median %.3g, %d pairs)" % (statistics.median(spreads), len(spreads))
        else:
            spread = "not measured: no native2 run"
        for k, v in ls.items():
            if k == "native":
                continue
            line = "%s %s: max |loss - native loss| = %.3g" % (w, k, max_diff(ls["native"], v))
            if base_kind(k) != "native" and len(natives) > 1:
                d = [max_diff(n, v) for n in natives]
                line += "; against each of %d native runs: median %.3g, max %.3g" % (len(d), statistics.median(d), max(d))
            print(line + " (native run-to-run: %s)" % spread)


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--alloc", help="one of %s, or vram:VRAM_ALLOC_CONF" % ", ".join(KINDS))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--cap-bytes", type=int, default=0, help="limit on reserved memory, as a smaller GPU")
    p.add_argument("--deterministic", action="store_true", help="PyTorch's deterministic kernels only")
    p.add_argument("--compile", choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                   help="run the training workloads' models through torch.compile(mode=...)")
    p.add_argument("--trace", help="vram only: write the run's allocation stream (memtrace v1) to this file")
    p.add_argument("--out")
    p.add_argument("--report", nargs="+")
    a = p.parse_args()
    if a.report:
        report(a.report)
        return
    if not a.alloc:
        p.error("--alloc or --report is required")
    if base_kind(a.alloc) not in KINDS and not a.alloc.startswith("vram:"):
        p.error("--alloc: unknown allocator %r" % a.alloc)
    if a.cap_bytes < 0:
        p.error("--cap-bytes: must be positive")
    if a.trace and not a.alloc.startswith("vram"):
        p.error("--trace: only with a vram allocator (record another with python -m vram_torch record)")
    if a.trace and not os.path.isdir(os.path.dirname(os.path.abspath(a.trace))):
        p.error("--trace %s: no such folder" % a.trace)
    names = a.workloads.split(",")
    unknown = [w for w in names if w not in WORKLOADS and w not in extra_workloads.WORKLOADS]
    if unknown:
        p.error("--workloads: unknown %s (known: %s)" % (", ".join(unknown), ", ".join(WORKLOADS + list(extra_workloads.WORKLOADS))))
    if a.compile and any(w not in WORKLOADS for w in names):
        p.error("--compile: only with %s" % ", ".join(WORKLOADS))
    d = run(a.alloc, a.steps, names, a.cap_bytes, a.deterministic, a.trace, a.compile)
    if a.out:
        json.dump(d, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()

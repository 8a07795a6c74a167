"""history_cost.py — what torch.cuda.memory._record_memory_history costs a training step, under
vram (vram_torch) or PyTorch's native allocator, one allocator per process.

    python3 bench/history_cost.py --alloc vram|native [--steps N] [--out FILE.json]

A 24-layer MLP (1024 wide, batch 64, AdamW) trains for --steps steps (after 5 warm-up steps) with
the history off, then on with context="all" and stacks="python" (every allocation's and free's
Python stack), then (native only) stacks="all" (C++ frames too, PyTorch's default). Prints the
median step time of each setting and its ratio to the history-off time, the history events a step
records, and the share of the allocation events whose frames name this file's code.
"""
import argparse
import json
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--alloc", choices=("vram", "native"), required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    if args.alloc == "vram":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
        import vram_torch
        vram_torch.enable()
    import torch

    torch.manual_seed(0)
    layers = []
    for _ in range(24):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(64, 1024, device="cuda")

    def step():
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def timed(n):
        times = []
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    settings = [("off", None), ("python stacks", "python")] + ([("all stacks", "all")] if args.alloc == "native" else [])
    for _ in range(5):
        step()
    result = {"alloc": args.alloc, "steps": args.steps, "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name(), "ms": {}}
    for name, stacks in settings:
        if stacks:
            torch.cuda.memory._record_memory_history(max_entries=100000, context="all", stacks=stacks)
        result["ms"][name] = timed(args.steps)
        if stacks:
            snap = torch.cuda.memory._snapshot()
            events = snap["device_traces"][torch.cuda.current_device()]
            allocs = [e for e in events if e["action"] == "alloc"]
            result["allocs_with_frames_here"] = sum(any(f["filename"].endswith("history_cost.py") for f in e["frames"])
                                                    for e in allocs) / max(1, len(allocs))
            result["events_per_step"] = len(events) / args.steps
            torch.cuda.memory._record_memory_history(enabled=None)
    base = result["ms"]["off"]
    print("# %s, %s, torch %s, %d steps (median step time)" % (args.alloc, result["gpu"], result["torch"], args.steps))
    for name, ms in result["ms"].items():
        print("%-14s %8.2f ms  %.3f x off" % (name, ms, ms / base))
    print("history events a step: %.0f; allocation events whose frames name this file: %.0f%%"
          % (result.get("events_per_step", 0), 100 * result.get("allocs_with_frames_here", 0)))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()

"""graph_trees_workout.py — torch.compile(mode="reduce-overhead") through the paths that restore
a CUDA graph tree's memory checkpoint, under PyTorch's native allocator or vram, side by side.

  python3 bench/graph_trees_workout.py native|vram [--json FILE]

One tree (no reset between phases), seeded, every output or gradient checked against an eager
twin, and 8 tensors allocated between calls that no replay may overwrite:
  A  an MLP, inference, batch 64: warm-up, recording, replays (6 calls)
  B  a second module trained 5 steps (forward and backward graphs) after A replayed
  C  A with a new input shape (batch 32, 4 calls): a new recording after replays
  D  B in eval mode under no_grad (3 calls)
  E  A at batch 64 again (3 calls: its graphs, recorded before, replay)
  F  B trained again with a third compiled function as its loss (3 steps): B's forward replays
     and, its outputs alive for the backward, the loss function records (a restore that keeps
     live outputs: under vram their storages adopt the recreated blocks)
Prints per phase the calls, whether all matched, the seconds taken, the checkpoint restores
(_cuda_setCheckpointPoolState calls) and the peak reserved bytes; then the bytes still allocated
once the trees are reset and the gradients dropped, beyond the parameters (what the graphs held
must all come back; cuBLAS's workspaces stay under either allocator). The last line is a one-line
table row; --json writes everything (tests/gpu/test_torch_plugin.py runs it under vram and checks
the JSON).
"""
import gc
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

args = sys.argv[1:]
kind = args[0] if args else ""
if kind not in ("native", "vram") or (len(args) not in (1, 3)) or (len(args) == 3 and args[1] != "--json"):
    sys.exit("usage: graph_trees_workout.py native|vram [--json FILE]")
if kind == "vram":
    import vram_torch
    vram_torch.enable()
    mem = vram_torch
else:
    mem = torch.cuda

restores = [0]
original_restore = torch._C._cuda_setCheckpointPoolState


def counted_restore(*a, **k):
    restores[0] += 1
    return original_restore(*a, **k)


torch._C._cuda_setCheckpointPoolState = counted_restore
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).cuda()
mlp_c = torch.compile(mlp, mode="reduce-overhead")
b_eager = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).cuda()
b_graph = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).cuda()
b_graph.load_state_dict(b_eager.state_dict())
b_c = torch.compile(b_graph, mode="reduce-overhead")
overwritten = [0]


def junk_between(fn):
    """Runs fn, then allocates 8 tensors, synchronizes and checks none was written by a replay."""
    out = fn()
    junk = [torch.full((64, 256), 3.0, device="cuda") for _ in range(8)]
    torch.cuda.synchronize()
    overwritten[0] += sum(int(not bool((j == 3.0).all())) for j in junk)
    return out


def infer(batch, calls):
    ok = True
    with torch.no_grad():
        for _ in range(calls):
            x = torch.randn(batch, 256, device="cuda")
            ok &= bool(torch.allclose(junk_between(lambda: mlp_c(x).clone()), mlp(x), atol=1e-3))
    return ok


def train(steps):
    ok = True
    for _ in range(steps):
        x = torch.randn(32, 128, device="cuda")
        for m in (b_eager, b_graph):
            for p in m.parameters():
                p.grad = None
        b_eager(x).square().mean().backward()
        junk_between(lambda: b_c(x).square().mean().backward())
        ok &= all(bool(torch.allclose(pe.grad, pg.grad, rtol=1e-3, atol=1e-4))
                  for pe, pg in zip(b_eager.parameters(), b_graph.parameters()))
    return ok


def evaluate(calls):
    ok = True
    b_graph.eval()
    b_eager.eval()
    with torch.no_grad():
        for _ in range(calls):
            x = torch.randn(32, 128, device="cuda")
            ok &= bool(torch.allclose(junk_between(lambda: b_c(x).clone()), b_eager(x), atol=1e-4))
    return ok


def loss_fn(y):
    return y.square().mean() + y.abs().mean()


loss_c = torch.compile(loss_fn, mode="reduce-overhead")


def train_with_compiled_loss(steps):
    ok = True
    b_graph.train()
    b_eager.train()
    for _ in range(steps):
        x = torch.randn(32, 128, device="cuda")
        for m in (b_eager, b_graph):
            for p in m.parameters():
                p.grad = None
        loss_fn(b_eager(x)).backward()
        junk_between(lambda: loss_c(b_c(x)).backward())
        ok &= all(bool(torch.allclose(pe.grad, pg.grad, rtol=1e-3, atol=1e-4))
                  for pe, pg in zip(b_eager.parameters(), b_graph.parameters()))
    return ok


phases = [("A", "inference, batch 64", lambda: infer(64, 6), 6),
          ("B", "second module trained", lambda: train(5), 5),
          ("C", "new shape, batch 32", lambda: infer(32, 4), 4),
          ("D", "second module in eval", lambda: evaluate(3), 3),
          ("E", "batch 64 again", lambda: infer(64, 3), 3),
          ("F", "compiled loss on B", lambda: train_with_compiled_loss(3), 3)]
results, failed = [], None
for name, what, run, calls in phases:
    before = restores[0]
    t0 = time.perf_counter()
    try:
        ok = run()
        error = None
    except Exception as e:  # a phase that fails is reported, the rest still run
        ok, error = False, "%s: %s" % (type(e).__name__, str(e)[:300])
        failed = failed or name
    torch.cuda.synchronize()
    results.append({"phase": name, "what": what, "calls": calls, "matched": ok, "error": error,
                    "seconds": round(time.perf_counter() - t0, 3), "restores": restores[0] - before,
                    "peak_reserved": mem.max_memory_reserved()})
    print("%s %-24s calls %d  matched %-5s  %7.3f s  restores %d  peak reserved %d%s"
          % (name, what, calls, ok, results[-1]["seconds"], results[-1]["restores"], results[-1]["peak_reserved"],
             "  " + error if error else ""), flush=True)

allocated_in_use = mem.memory_allocated()
for m in (b_eager, b_graph):
    for p in m.parameters():
        p.grad = None
del mlp_c, b_c, loss_c
torch.cuda.synchronize()
torch._dynamo.reset()
import torch._inductor.config as inductor_config  # noqa: E402
import torch._inductor.cudagraph_trees as trees  # noqa: E402
trees.reset_cudagraph_trees()
gc.collect()
left = mem.memory_allocated()
params = sum(p.numel() * p.element_size() for m in (mlp, b_eager, b_graph) for p in m.parameters())
summary = {"allocator": kind, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
           "host": platform.node(), "phases": results, "replays_overwrote": overwritten[0],
           "allocated_before_reset": allocated_in_use, "allocated_after_reset": left,
           "parameters_bytes": params, "restores": restores[0],
           "slow_path_asserts": bool(inductor_config.triton.slow_path_cudagraph_asserts)}
if kind == "vram":
    import vram_torch.graph_trees as graph_trees
    summary["vram_restores"] = dict(graph_trees.COUNTS)
    summary["vram_recreated_left"] = len(graph_trees.held())
    print("vram: %s; recreated blocks left after the reset: %d" % (summary["vram_restores"],
                                                                  summary["vram_recreated_left"]))
print("replays overwrote %d tensors; allocated %d before the reset, %d after (parameters %d)"
      % (overwritten[0], allocated_in_use, left, params))
if len(args) == 3:
    with open(args[2], "w") as f:
        json.dump(summary, f, indent=1)
all_ok = all(r["matched"] for r in results) and not overwritten[0]
print("| %s | %s | %d | %d | %.2f | %d |" % (kind, "all matched" if all_ok else "FAILED at " + str(failed or "a check"),
                                             restores[0], max(r["peak_reserved"] for r in results),
                                             sum(r["seconds"] for r in results), left - params))
sys.exit(0 if all_ok else 1)

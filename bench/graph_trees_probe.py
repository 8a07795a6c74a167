"""graph_trees_probe.py — what torch.compile's CUDA graph trees (mode="reduce-overhead") ask of the
allocator, and whether they work, under PyTorch's native allocator or vram.

  python3 bench/graph_trees_probe.py native|vram

Compiles an MLP with mode="reduce-overhead" and calls it five times under no_grad (warm-up,
recording, replays), each output checked against eager; then compiles a second function and runs
it once in the same tree (which needs a restore of the pool's checkpoint). Under vram every call
the trees make to vram_torch's stand-ins for PyTorch's pool functions (vram_torch/graph_trees.py)
is printed, with its arguments (sets and lists by their length) and result.
"""
import os
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

kind = sys.argv[1] if len(sys.argv) > 1 else "vram"
if kind not in ("native", "vram"):
    sys.exit("usage: graph_trees_probe.py native|vram")
if kind == "vram":
    import vram_torch
    import vram_torch.graph_trees as graph_trees
    vram_torch.enable()
    for name in list(graph_trees.ORIGINALS):
        def traced(*args, _fn=getattr(torch._C, name), _name=name, **kwargs):
            result = _fn(*args, **kwargs)
            shown = [len(a) if isinstance(a, (set, list)) else a for a in args]
            print("  torch._C.%s%s -> %s" % (_name, tuple(shown), type(result).__name__ if result is not None
                                              and not isinstance(result, bool) else result), flush=True)
            return result
        setattr(torch._C, name, traced)

net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).cuda()
compiled = torch.compile(net, mode="reduce-overhead")
try:
    with torch.no_grad():
        for call in range(5):
            x = torch.randn(64, 256, device="cuda")
            print("call %d: output equals eager's: %s" % (call, bool(torch.allclose(compiled(x).clone(), net(x), atol=1e-3))),
                  flush=True)
    second = torch.compile(lambda x: net(x).square().mean(), mode="reduce-overhead")
    with torch.no_grad():
        print("second function: %s" % float(second(torch.randn(64, 256, device="cuda"))), flush=True)
except Exception as e:
    print("%s: %s" % (type(e).__name__, str(e)[:300]), flush=True)
    traceback.print_exc(limit=-3)

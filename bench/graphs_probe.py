"""graphs_probe.py — what a CUDA graph's memory goes through under an allocator, on a GPU.

A graph is captured on a side stream (its temporaries freed during the capture); then the cache
is emptied, tensors are allocated on the capture stream and on the default stream and filled
with 7, and the graph replays. Under PyTorch's allocator the capture's private pool keeps the
graph's memory out of reach, so the replay overwrites nothing and its output is right.

    python3 bench/graphs_probe.py native|vram|vram-unwrapped

vram-unwrapped is vram with torch.cuda.CUDAGraph's original methods put back after enable(),
i.e. a pluggable allocator that is told nothing of captures (what PyTorch gives any pluggable
allocator). Then the memory a whole captured training step holds, and torch.compile, default and
mode="reduce-overhead". Prints one line each.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

kind = sys.argv[1] if len(sys.argv) > 1 else "vram"
if kind.startswith("vram"):
    import vram_torch
    G = torch.cuda.CUDAGraph
    originals = (G.capture_begin, G.capture_end, G.reset)
    vram_torch.enable()
    if kind == "vram-unwrapped":
        G.capture_begin, G.capture_end, G.reset = originals


def case(name, fn):
    t0 = time.time()
    try:
        print("%s | %s | %s (%.1f s)" % (kind, name, fn(), time.time() - t0), flush=True)
    except Exception as e:
        print("%s | %s | %s: %s (%.1f s)" % (kind, name, type(e).__name__, str(e)[:200], time.time() - t0), flush=True)


def graph_case(empty_cache):
    def run():
        torch.manual_seed(0)
        lin1, lin2 = torch.nn.Linear(1024, 4096).cuda(), torch.nn.Linear(4096, 1024).cuda()
        x = torch.randn(64, 1024, device="cuda")

        def f(v):
            return lin2(torch.relu(lin1(v)) * 2 + 1)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                f(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            y = f(x)
        torch.cuda.synchronize()
        if empty_cache:
            torch.cuda.empty_cache()
        with torch.cuda.stream(s):
            junk = [torch.full((64, 4096), 7.0, device="cuda") for _ in range(40)]
        junk += [torch.full((64, 4096), 7.0, device="cuda") for _ in range(40)]
        torch.cuda.synchronize()
        x.copy_(torch.randn(64, 1024, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        ok = torch.allclose(y, f(x), atol=1e-3)
        bad = sum(int(not bool((j == 7).all())) for j in junk)
        return "replay output right: %s; tensors overwritten by the replay: %d of 80" % (ok, bad)
    return run


def compile_case(mode):
    def run():
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)).cuda()
        cm = torch.compile(m, mode=mode)
        x = torch.randn(32, 256, device="cuda")
        with torch.no_grad():
            for _ in range(3):
                o = cm(x)
            return "matches eager: %s" % torch.allclose(o, m(x), atol=1e-4)
    return run


def graph_memory():
    """Memory a captured training step holds: a 4-layer transformer encoder (d 512, batch 16 x 256),
    SGD, warmed up on the capture stream, then the whole step captured."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 256, 512, device="cuda")

    def step():
        opt.zero_grad(set_to_none=False)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    mib = 2.0 ** 20
    r0, a0 = torch.cuda.memory_reserved() / mib, torch.cuda.memory_allocated() / mib
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        loss = step()
    torch.cuda.synchronize()
    r1, a1 = torch.cuda.memory_reserved() / mib, torch.cuda.memory_allocated() / mib
    ref = float(loss)
    g.replay()
    torch.cuda.synchronize()
    return ("reserved %.0f -> %.0f MiB after the capture (+%.0f), allocated %.0f -> %.0f MiB; loss %.6f then %.6f"
            % (r0, r1, r1 - r0, a0, a1, ref, float(loss)))


case("graph, cache reused", graph_case(False))
case("graph, empty_cache then cache reused", graph_case(True))
case("captured training step: memory", graph_memory)
case("torch.compile default", compile_case(None))
case("torch.compile reduce-overhead", compile_case("reduce-overhead"))

"""test_torch_plugin.py — vram_torch under a real PyTorch on a GPU: tensors computed through
vram's allocator, its statistics, summary and snapshot (also through torch.cuda's own functions,
and the memory visualizer's _record_memory_history / _snapshot / _dump_snapshot),
OOM as torch.OutOfMemoryError with recovery, empty_cache visible in cudaMemGetInfo, four threads
allocating at once, record_stream
(vram_torch's and Tensor.record_stream), CUDA graphs (a graph's memory stays its own after
empty_cache and after other tensors reuse the cache; replay still right; another stream's
allocations during a capture are not the graph's; two captures at once in two threads each
keep their own memory; make_graphed_callables
against eager), torch.compile and its mode="reduce-overhead" (CUDA graph trees: two compiled
modules in one tree, training and eval, a new input shape, checkpoint restores),
enable() refused after CUDA use,
and `python -m vram_torch record` writing a memtrace v1 file. Exits 77 (skipped) without torch,
a GPU or libvram_torch.so.
"""
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from pycheck import check, done  # noqa: E402
from torch_setup import start  # noqa: E402

torch, vram_torch = start(min_devices=1)
check(vram_torch.is_enabled(), "enabled")

# Compute through vram.
a = torch.randn(1024, 1024, device="cuda")
b = torch.randn(1024, 1024, device="cuda")
c = a @ b
ref = (a.double() @ b.double()).float()
check(torch.allclose(c, ref, rtol=1e-2, atol=1e-2), "matmul on vram memory is right")
st = vram_torch.memory_stats()
check(st.get("allocated_bytes.all.current", 0) >= 3 * 4 * 1024 * 1024, "allocated counts the three tensors: %s" % st.get("allocated_bytes.all.current"))
check(vram_torch.memory_allocated() == st["allocated_bytes.all.current"], "memory_allocated")
check(vram_torch.max_memory_allocated() >= vram_torch.memory_allocated(), "max_memory_allocated")
check(vram_torch.memory_reserved() >= vram_torch.memory_allocated(), "memory_reserved")
before = vram_torch.memory_allocated()
x = torch.empty(100 * 2**20, dtype=torch.uint8, device="cuda")
check(vram_torch.memory_allocated() - before >= 100 * 2**20, "a 100 MiB tensor is counted")
del x
check(vram_torch.memory_allocated() == before, "and uncounted when freed")
vram_torch.reset_peak_memory_stats()
check(vram_torch.max_memory_allocated() == vram_torch.memory_allocated(), "reset_peak_memory_stats")

# Empty tensors take no memory and have data_ptr() 0, as under PyTorch's own allocator: no
# allocation is counted, and using, recording and freeing them works.
count0 = vram_torch.memory_stats()["allocation.all.allocated"]
empties = [torch.empty(0, device="cuda"), a[:0].clone(), torch.cat([a[:0], b[:0]]), torch.zeros(3, 0, device="cuda")]
empties[0].record_stream(torch.cuda.Stream())
check(all(e.data_ptr() == 0 for e in empties), "empty tensors have no memory: %s" % [e.data_ptr() for e in empties])
check(vram_torch.memory_stats()["allocation.all.allocated"] == count0, "no allocation counted for them: %d -> %d"
      % (count0, vram_torch.memory_stats()["allocation.all.allocated"]))
check((empties[1] @ b[:, :0]).shape == (0, 0) and float(empties[3].sum()) == 0.0, "and they compute as empty tensors")
del empties

# PyTorch's own functions answer from vram too (vram_torch.enable() routes them), so an unchanged
# script that logs its memory runs.
y = torch.empty(50 * 2**20, dtype=torch.uint8, device="cuda")
check(torch.cuda.memory_allocated() == vram_torch.memory_allocated() >= 50 * 2**20, "torch.cuda.memory_allocated")
check(torch.cuda.max_memory_allocated() == vram_torch.max_memory_allocated(), "torch.cuda.max_memory_allocated")
check(torch.cuda.memory_reserved() == vram_torch.memory_reserved(), "torch.cuda.memory_reserved")
check(torch.cuda.memory_stats()["allocated_bytes.all.current"] == vram_torch.memory_allocated(), "torch.cuda.memory_stats")
check(torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["current"] == vram_torch.memory_allocated(),
      "torch.cuda.memory_stats_as_nested_dict")
check("Allocated memory" in torch.cuda.memory_summary(), "torch.cuda.memory_summary")
check(len(torch.cuda.memory_snapshot()) >= 1, "torch.cuda.memory_snapshot lists segments")
# every key PyTorch's own memory_stats() has, in a program that allocated, vram's has too
native_keys = subprocess.run([sys.executable, "-c", "import json, torch; x = torch.ones(1 << 20, device='cuda'); "
                              "print(json.dumps(sorted(torch.cuda.memory_stats())))"],
                             capture_output=True, text=True, env=dict(os.environ))
missing = sorted(set(json.loads(native_keys.stdout or "[]")) - set(torch.cuda.memory_stats()))
check(native_keys.returncode == 0 and not missing, "memory_stats() keys PyTorch has and vram lacks: %s %s"
      % (missing, native_keys.stderr[-200:]))
# torch.accelerator's memory functions (PyTorch 2.9+), which under a pluggable allocator read 0 or
# raise (run 137), answer from vram
if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "max_memory_allocated"):
    check(torch.accelerator.memory_allocated() == vram_torch.memory_allocated() >= 50 * 2**20,
          "torch.accelerator.memory_allocated: %d" % torch.accelerator.memory_allocated())
    check(torch.accelerator.max_memory_allocated() == vram_torch.max_memory_allocated(), "torch.accelerator.max_memory_allocated")
    check(torch.accelerator.memory_stats()["reserved_bytes.all.current"] == vram_torch.memory_reserved()
          == torch.accelerator.memory_reserved(), "torch.accelerator.memory_stats / memory_reserved")
    torch.accelerator.reset_peak_memory_stats()
    check(torch.accelerator.max_memory_allocated() == torch.accelerator.memory_allocated(),
          "torch.accelerator.reset_peak_memory_stats")
    torch.accelerator.empty_cache()
del y
torch.cuda.reset_peak_memory_stats()
check(torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated(), "torch.cuda.reset_peak_memory_stats")
torch.cuda.empty_cache()
check(vram_torch.memory_reserved() < vram_torch.memory_allocated() + 64 * 2**20, "torch.cuda.empty_cache empties vram's cache")
# torch.cuda.memory.caching_allocator_enable(False): a no-op under
# a pluggable allocator (run 137); under vram every free then returns its memory
if hasattr(torch.cuda.memory, "caching_allocator_enable"):  # caching_allocator_disabled() came after 2.11
    # (compared with what was reserved while the tensor lived: it may also have used free memory
    # left in a chunk that live blocks keep, which no free returns; run 141 had a stricter check)
    torch.cuda.memory.caching_allocator_enable(False)
    z = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    held = vram_torch.memory_reserved()
    del z
    check(not vram_torch.caching_allocator_enabled() and vram_torch.memory_reserved() <= held - 192 * 2**20,
          "caching off: a 256 MiB tensor's memory goes back at its free (all but what shares a 64 MiB chunk "
          "with live blocks): %d -> %d" % (held, vram_torch.memory_reserved()))
    torch.cuda.memory.caching_allocator_enable(True)
    z = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    held = vram_torch.memory_reserved()
    del z
    check(vram_torch.caching_allocator_enabled() and vram_torch.memory_reserved() == held,
          "caching on again: the free is cached: %d -> %d" % (held, vram_torch.memory_reserved()))
    torch.cuda.empty_cache()

# The memory visualizer's entry points: _record_memory_history, _snapshot, _dump_snapshot, with
# the Python stacks of the allocations (PyTorch's defaults: context="all", stacks="all"), which
# reach vram_torch_alloc through PyTorch's C++ with the GIL released.
torch.cuda.memory._record_memory_history(max_entries=1000)


def make_buffer():
    return torch.empty(10 * 2**20, dtype=torch.uint8, device="cuda")  # the line the frames name


def matmul_here(a):
    return a @ a  # an operator's output, allocated inside the operator


CALL_LINE = sys._getframe().f_lineno + 1
w, keep = make_buffer(), matmul_here(torch.ones(512, 512, device="cuda"))
w_ptr = w.data_ptr()
del w
snap = torch.cuda.memory._snapshot()
acts = [e["action"] for e in snap["device_traces"][0]]
check("alloc" in acts and "free_requested" in acts, "_snapshot() has vram's recent events: %s" % acts[-6:])
alloc_ev = [e for e in snap["device_traces"][0] if e["action"] == "alloc" and e["addr"] == w_ptr]
free_ev = [e for e in snap["device_traces"][0] if e["action"] == "free_requested" and e["addr"] == w_ptr]
top = lambda frames: [(f["name"], f["line"]) for f in frames[:2]]
check(alloc_ev and top(alloc_ev[-1]["frames"]) == [("make_buffer", make_buffer.__code__.co_firstlineno + 1),
                                                   ("<module>", CALL_LINE)],
      "the alloc event's Python frames: %s" % (top(alloc_ev[-1]["frames"]) if alloc_ev else None))
check(free_ev and free_ev[-1]["frames"] and free_ev[-1]["frames"][0]["name"] == "<module>",
      "the free event's frames: %s" % (top(free_ev[-1]["frames"]) if free_ev else None))
kept = [b for seg in snap["segments"] for b in seg["blocks"] if b["address"] == keep.data_ptr()]
check(kept and top(kept[0]["frames"])[:1] == [("matmul_here", matmul_here.__code__.co_firstlineno + 1)],
      "a live block's frames name where the operator allocating it was called: %s"
      % (top(kept[0]["frames"]) if kept else None))
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "snap.pickle")
    torch.cuda.memory._dump_snapshot(path)
    import pickle
    with open(path, "rb") as f:
        dumped = pickle.load(f)
    check(len(dumped["segments"]) >= 1 and len(dumped["device_traces"][0]) >= 2, "_dump_snapshot pickles vram's snapshot")
    from torch.cuda import _memory_viz
    # PyTorch's own reader of the live blocks' frames (the lines it would hand flamegraph.pl)
    text = _memory_viz.memory(dumped, format_flamegraph=lambda lines: lines)
    check("matmul_here" in text, "torch.cuda._memory_viz.memory names the allocating code: %s" % text[:300])
del keep
torch.cuda.memory._record_memory_history(enabled=None)
check(all(t == [] for t in torch.cuda.memory._snapshot()["device_traces"]), "_record_memory_history(enabled=None) stops it")

try:
    s = vram_torch.memory_summary()
    check("Allocated memory" in s or "allocated" in s.lower(), "memory_summary has the table")
    print(s)
except RuntimeError as e:
    check(False, "memory_summary unavailable: %s" % e)
try:
    snap = vram_torch.snapshot()
    check(len(snap.get("segments", [])) >= 1, "snapshot lists segments")
except RuntimeError as e:
    check(False, "snapshot unavailable: %s" % e)

# torch.backends.cudnn.benchmark: cuDNN asks the allocator's cacheInfo before benchmarking a new
# convolution, which PyTorch's pluggable allocator raises on ("does not yet support cacheInfo":
# every convolution failed under vram until the plug-in answered it, src/torch/cache_info.cpp).
torch.backends.cudnn.benchmark = True
conv = torch.nn.Conv2d(3, 16, 3, padding=1).cuda()
img = torch.randn(8, 3, 64, 64, device="cuda", requires_grad=True)
try:
    out = conv(img)
    out.square().mean().backward()
    with torch.backends.cudnn.flags(enabled=False):
        ref = conv(img)
    check(torch.allclose(out, ref, atol=1e-4), "a convolution under cudnn.benchmark equals the non-cuDNN one")
except RuntimeError as e:
    check(False, "a convolution under cudnn.benchmark: %s" % str(e)[:200])
torch.backends.cudnn.benchmark = False
del conv, img

# torch.profiler's memory columns (profile_memory=True), which no pluggable allocator feeds: vram
# reports each allocation and free to c10's profiler hooks, as PyTorch's own allocator does.
from torch.profiler import ProfilerActivity, profile  # noqa: E402
with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
    t = torch.empty(8 * 2**20, dtype=torch.uint8, device="cuda")
    del t
empties = [e for e in prof.key_averages() if e.key == "aten::empty"]
usage = lambda e: e.self_device_memory_usage if hasattr(e, "self_device_memory_usage") else e.self_cuda_memory_usage
check(empties and sum(usage(e) for e in empties) == 8 * 2**20,
      "the profiler sees aten::empty allocate 8 MiB of device memory: %s" % [usage(e) for e in empties])
frees = [e for e in prof.events() if e.name == "[memory]" and usage(e) == -8 * 2**20]
check(len(frees) == 1, "and the free, as a [memory] event of -8 MiB: %d" % len(frees))

# torch.cuda.memory._set_allocator_settings once the allocator runs: applied at once and quietly
# (through PyTorch's own call too), as under PyTorch's allocator, expandable_segments included
# (while it is off, new memory comes as segments); nothing raises.
import warnings  # noqa: E402
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch.cuda.memory._set_allocator_settings("expandable_segments:True")
    torch.cuda.memory._set_allocator_settings("roundup_power2_divisions:4")
    torch.cuda.empty_cache()
    torch.cuda.memory._set_allocator_settings("expandable_segments:False")
    seg = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")  # more than the emptied cache holds: new memory
    torch.cuda.memory._set_allocator_settings("expandable_segments:True")
    said = [str(w.message) for w in caught if str(w.message).startswith("vram:")]  # not PyTorch's deprecation
check(not said, "_set_allocator_settings under vram: quiet for what applies: %s" % said)
kinds = [s["is_expandable"] for s in torch.cuda.memory._snapshot()["segments"]
         if s["address"] <= seg.data_ptr() < s["address"] + s["total_size"]]
check(kinds == [False], "expandable_segments off at run time: the new memory is a segment (%s)" % kinds)
del seg
torch.cuda.empty_cache()  # the segment goes back to the driver
before = torch.cuda.memory_allocated()
t = torch.empty((5 << 20) + 1, dtype=torch.uint8, device="cuda")
check(torch.cuda.memory_allocated() - before == 6 << 20 and "roundup_power2_divisions:4" in vram_torch.alloc_conf(),
      "the running allocator rounds the next request as the settings say (5 MiB + 1 -> 6 MiB): %d"
      % (torch.cuda.memory_allocated() - before))
del t
torch.cuda.memory._set_allocator_settings("roundup_power2_divisions:1")  # 512-byte rounding again, as before
try:  # a bad value raises what PyTorch's own call raises (RuntimeError), nothing changed
    torch.cuda.memory._set_allocator_settings("garbage_collection_threshold:2")
    raised = None
except RuntimeError as e:
    raised = e
check(raised is not None and "garbage_collection_threshold" in str(raised) and "garbage_collection" not in vram_torch.alloc_conf(),
      "a bad setting raises RuntimeError, as under PyTorch's allocator: %r" % raised)

# Out of memory: a limit, a torch.OutOfMemoryError, and recovery; an observer attached as
# PyTorch's docs show (torch._C._cuda_attach_out_of_memory_observer, which raises under any other
# pluggable allocator) dumps a snapshot of the moment, with the history's events and stacks.
vram_torch.set_per_process_memory_fraction(0.05)
if hasattr(torch.cuda, "get_per_process_memory_fraction"):  # raises under other pluggable allocators
    check(torch.cuda.get_per_process_memory_fraction() == 0.05, "torch.cuda.get_per_process_memory_fraction reads vram's")
cap = torch.cuda.get_device_properties(0).total_memory
oom_seen, oom_dump = [], os.path.join(tempfile.mkdtemp(), "oom.pickle")


def oom_observer(device, alloc, device_total, device_free):
    oom_seen.append((device, alloc, device_total, device_free))
    torch.cuda.memory._dump_snapshot(oom_dump)


torch._C._cuda_attach_out_of_memory_observer(oom_observer)
torch.cuda.memory._record_memory_history(max_entries=1000)
try:
    big = torch.empty(int(cap * 0.2), dtype=torch.uint8, device="cuda")
    check(False, "an allocation above the fraction must fail")
except torch.OutOfMemoryError as e:
    # what batch-size finders test (accelerate's should_reduce_batch_size, toma): one argument
    # holding PyTorch's words "CUDA out of memory."
    check(len(e.args) == 1 and "CUDA out of memory." in e.args[0], "OOM message: %s" % str(e)[:200])
    try:
        from accelerate.utils.memory import should_reduce_batch_size
        check(should_reduce_batch_size(e), "accelerate's find_executable_batch_size would halve the batch")
    except ImportError:
        print("accelerate not installed: its batch-size finder not asked")
    print("OutOfMemoryError raised as torch.OutOfMemoryError")
except RuntimeError as e:
    check(False, "OOM came as RuntimeError, not torch.OutOfMemoryError: %s" % str(e)[:300])
check(len(vram_torch.oom_report()) > 0, "oom_report kept")
torch.cuda.memory._record_memory_history(enabled=None)
check(len(oom_seen) == 1 and oom_seen[0][:2] == (0, int(cap * 0.2)) and 0 < oom_seen[0][2] <= cap * 0.05 + 2**21
      and 0 < oom_seen[0][3] <= cap, "the OOM observer called once with (device, alloc, limit, free): %s" % oom_seen)
if os.path.exists(oom_dump):
    with open(oom_dump, "rb") as f:
        import pickle
        at_oom = pickle.load(f)
    ooms = [e for e in at_oom["device_traces"][0] if e["action"] == "oom"]
    check(ooms and ooms[-1]["size"] >= int(cap * 0.2) and any(fr["name"] == "<module>" for fr in ooms[-1]["frames"]),
          "the snapshot dumped at the OOM has its event, with the Python stack: %s" % (ooms[-1:] or None))
else:
    check(False, "the observer's _dump_snapshot wrote nothing")
ok = torch.ones(1000, device="cuda")
check(float(ok.sum()) == 1000.0, "allocation after OOM works")
vram_torch.set_per_process_memory_fraction(1.0)

# empty_cache: cudaMemGetInfo shows the cache returned.
xs = [torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda") for _ in range(8)]
del xs
torch.cuda.synchronize()
free0, _ = torch.cuda.mem_get_info()
cached = vram_torch.memory_reserved() - vram_torch.memory_allocated()
vram_torch.empty_cache()
free1, _ = torch.cuda.mem_get_info()
check(cached >= 2 * 2**30 - 2**20, "2 GiB cached: %d" % cached)
check(free1 - free0 >= cached - 8 * 2**20, "empty_cache freed %d of %d cached on the device" % (free1 - free0, cached))

# Four threads allocate, fill and free at once (PyTorch releases the GIL inside its ops), so the
# allocator's lock passes between them and its bias to one thread is revoked again and again
# (src/memory/lock.h): every tensor must still hold its own thread's values when it is freed.
import random  # noqa: E402
import threading  # noqa: E402

torch.cuda.synchronize()
allocated0 = vram_torch.memory_allocated()
wrong, thread_errors = [0] * 4, []


def churn(k):
    try:
        rng, live = random.Random(k), []
        for i in range(400):
            n = rng.randint(256, 2 * 2**20)  # floats: 1 KiB to 8 MiB
            live.append((torch.full((n,), float(k * 1000 + i), device="cuda"), k * 1000 + i))
            if len(live) > 6 or rng.random() < 0.3:
                t, v = live.pop(rng.randrange(len(live)))
                wrong[k] += int(not bool((t == v).all()))
        for t, v in live:
            wrong[k] += int(not bool((t == v).all()))
    except Exception as e:  # reported below, in the main thread
        thread_errors.append("%s: %s" % (type(e).__name__, e))


workers = [threading.Thread(target=churn, args=(k,)) for k in range(4)]
for t in workers:
    t.start()
for t in workers:
    t.join()
torch.cuda.synchronize()
check(not thread_errors and sum(wrong) == 0, "four threads allocating at once: every tensor kept its values "
      "(%s wrong, errors %s)" % (wrong, thread_errors))
check(vram_torch.memory_allocated() == allocated0, "and all of it freed: %d -> %d"
      % (allocated0, vram_torch.memory_allocated()))

# record_stream: a tensor used on a side stream that is still busy when the tensor is freed; the
# default stream then allocates and overwrites tensors of the same size at once. Were the freed
# block handed out before the side stream's work, one of them would take it and the side
# stream's result would be wrong.
side = torch.cuda.Stream()


def used_on_side(factor, record):
    t = torch.ones(2**20, device="cuda")
    side.wait_stream(torch.cuda.current_stream())  # t is filled before the side stream reads it
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # the side stream is still busy when t is freed
        u = t * factor
    record(t)
    active0 = vram_torch.memory_stats()["active_bytes.all.current"]
    ptr = t.data_ptr()
    del t
    active1 = vram_torch.memory_stats()["active_bytes.all.current"]
    others = [torch.full((2**20,), 7.0, device="cuda") for _ in range(8)]
    taken = sum(o.data_ptr() == ptr for o in others)
    torch.cuda.synchronize()
    return float(u.sum()), active1 == active0, taken


got, kept_active, taken = used_on_side(2, lambda t: vram_torch.record_stream(t, side))
check(got == 2 * 2**20 and taken == 0, "record_stream: the side stream's result is right (%g) and the freed "
      "block was not handed out before its work finished (%d taken)" % (got, taken))
# Tensor.record_stream (routed to vram): the same, and the freed block stays active until then
got, kept_active, taken = used_on_side(3, lambda t: t.record_stream(side))
check(got == 3 * 2**20 and taken == 0 and kept_active, "Tensor.record_stream: result %g, %d taken early, freed "
      "block active until the side stream's event: %s" % (got, taken, kept_active))

# A recordStream from PyTorch's C++ (ProcessGroupNCCL, torch.cuda.nccl, C++ extensions call it;
# here PyTorch's own Tensor.record_stream, which vram_torch's Python route would otherwise
# bypass): PyTorch's pluggable allocator drops it, vram answers it (src/torch/pluggable_patch.cpp),
# so a tensor freed right after stays active until the side stream's work is done.
from vram_torch import torch_routes  # noqa: E402
t = torch.ones(4 * 2**20, device="cuda")  # 16 MiB
torch_routes.ORIGINALS[("torch.Tensor", "record_stream")](t, side)
del t
s = vram_torch.memory_stats()
pending = s["active_bytes.all.current"] - s["allocated_bytes.all.current"]
check(pending >= 16 * 2**20, "PyTorch's C++ record_stream reaches vram: the freed tensor stays active, %d bytes" % pending)
torch.cuda.synchronize()

# CUDA graphs: what the capture allocated is the graph's until it is reset, as in PyTorch's
# private pools. The capture's temporaries are freed during the capture; afterwards the cache is
# emptied and the capture stream and the default stream allocate again, then the graph replays.
torch.manual_seed(0)
lin1, lin2 = torch.nn.Linear(1024, 4096).cuda(), torch.nn.Linear(4096, 1024).cuda()
xg = torch.randn(64, 1024, device="cuda")


def mlp(inp):
    return lin2(torch.relu(lin1(inp)) * 2 + 1)


cap = torch.cuda.Stream()
cap.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(cap):
    for _ in range(3):
        mlp(xg)
torch.cuda.current_stream().wait_stream(cap)
torch.cuda.synchronize()
torch.cuda.empty_cache()
reserved0 = vram_torch.memory_reserved()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph, stream=cap):
    yg = mlp(xg)
    scratch = torch.ones(256 * 2**20, dtype=torch.uint8, device="cuda")  # a 256 MiB temporary of the graph
    del scratch
torch.cuda.synchronize()
torch.cuda.empty_cache()
held = vram_torch.memory_reserved() - reserved0
check(held >= 192 * 2**20, "empty_cache keeps the graph's memory, its freed 256 MiB temporary included: %d MiB held"
      % (held // 2**20))
snap_blocks = [b for seg in vram_torch.snapshot()["segments"] for b in seg["blocks"]]
pool_free = sum(b["size"] for b in snap_blocks if b.get("graph_pool") and b["state"] == "inactive")
pool_live = [b for b in snap_blocks if b.get("graph_pool") and b["state"] == "active_allocated"]
check(pool_free >= 256 * 2**20 and any(b["address"] == yg.data_ptr() for b in pool_live),
      "the snapshot names the graph's pool on its blocks: %d MiB free in it (the temporary), its output among %d live"
      % (pool_free // 2**20, len(pool_live)))
with torch.cuda.stream(cap):
    junk = [torch.full((64, 4096), 7.0, device="cuda") for _ in range(40)]
junk += [torch.full((64, 4096), 7.0, device="cuda") for _ in range(40)]
torch.cuda.synchronize()
xg.copy_(torch.randn(64, 1024, device="cuda"))
graph.replay()
torch.cuda.synchronize()
check(torch.allclose(yg, mlp(xg), atol=1e-3), "graph replay after empty_cache and reuse of the cache is right")
bad = sum(int(not bool((j == 7).all())) for j in junk)
check(bad == 0, "no tensor allocated after the capture is overwritten by the replay (%d of 80 were)" % bad)
del junk, yg
graph.reset()
del graph
torch.cuda.synchronize()
torch.cuda.empty_cache()
check(vram_torch.memory_reserved() <= reserved0 + 64 * 2**20, "reset() gives the graph's memory back: %d -> %d MiB"
      % (reserved0 // 2**20, vram_torch.memory_reserved() // 2**20))
# Only the capture's streams allocate into its pool: a tensor another stream allocates and frees
# during the capture goes back with the cache afterwards, as under PyTorch's allocator (vram asks
# the driver which streams the capture records).
side = torch.cuda.Stream()
torch.cuda.synchronize()
torch.cuda.empty_cache()
base = vram_torch.memory_reserved()
graph2 = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph2, stream=cap):
    y2 = mlp(xg)
    with torch.cuda.stream(side):
        big = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    del big
torch.cuda.synchronize()
torch.cuda.empty_cache()
held = vram_torch.memory_reserved() - base
check(held < 160 * 2**20, "another stream's 256 MiB, freed during a capture, is not kept for the graph: %d MiB held"
      % (held // 2**20))
graph2.replay()
torch.cuda.synchronize()
check(torch.allclose(y2, mlp(xg), atol=1e-3), "the graph replays right")
del y2, graph2
torch.cuda.synchronize()
torch.cuda.empty_cache()
# Two captures under way at once, in two threads (capture_error_mode="thread_local", as PyTorch
# allows), each with temporaries freed during its capture: each capture's memory must be its own
# pool's. The graph begun last is released, the cache emptied and refilled with junk; the other
# graph then replays right and writes nothing into the junk. (Were every capturing stream's
# allocations given to one pool, the newest capture's, releasing it would hand the older graph's
# temporaries to the junk.)
import warnings  # noqa: E402

torch.cuda.synchronize()
torch.cuda.empty_cache()
xs = [torch.randn(64, 1024, device="cuda") for _ in range(2)]
graphs, outs, errors = [torch.cuda.CUDAGraph() for _ in range(2)], [None, None], []
begun, computed = threading.Barrier(2), threading.Barrier(2)
order = []


def capture(k):
    try:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(3):  # warm-up in this thread (its cuBLAS handle) and stream
                mlp(xs[k])
            s.synchronize()
            if k == 1:
                begun.wait()  # thread 1 begins second
            graphs[k].capture_begin(capture_error_mode="thread_local")
            order.append(k)
            if k == 0:
                begun.wait()
            computed.wait()  # both captures under way from here on
            h = torch.relu(lin1(xs[k])) * (k + 2)
            outs[k] = lin2(h) + torch.relu(lin1(xs[k])).sum(dim=1, keepdim=True)
            del h
            graphs[k].capture_end()
    except Exception as e:  # reported below, in the main thread
        errors.append("%s: %s" % (type(e).__name__, e))


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    threads = [threading.Thread(target=capture, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
check(not errors and order == [0, 1], "two captures under way at once in two threads: %s %s" % (errors, order))
check(not [w for w in caught if "vram_torch" in str(w.message)], "the driver names each capture: %s"
      % [str(w.message) for w in caught])
if not errors:
    graphs[1].reset()  # the graph begun last
    outs[1] = None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    junk = [torch.full((64, 4096), 7.0, device="cuda") for _ in range(120)]
    xs[0].copy_(torch.randn(64, 1024, device="cuda"))
    graphs[0].replay()
    torch.cuda.synchronize()
    want = lin2(torch.relu(lin1(xs[0])) * 2) + torch.relu(lin1(xs[0])).sum(dim=1, keepdim=True)
    check(torch.allclose(outs[0], want, rtol=1e-4, atol=1e-2), "the older graph replays right after the other's release")
    bad = sum(int(not bool((j == 7).all())) for j in junk)
    check(bad == 0, "its replay writes into none of 120 tensors allocated after the release (%d were)" % bad)
    del junk
del graphs, outs, xs
torch.cuda.synchronize()
torch.cuda.empty_cache()
# make_graphed_callables: forward and backward graphs sharing one pool, against eager
torch.manual_seed(1)
eager = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).cuda()
graphed = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).cuda()
graphed.load_state_dict(eager.state_dict())
sample = torch.randn(32, 512, device="cuda", requires_grad=True)
graphed = torch.cuda.make_graphed_callables(graphed, (sample,))
for step in range(3):
    for param in list(eager.parameters()) + list(graphed.parameters()):
        param.grad = None  # each step's gradients alone (the warm-up left some in the graphed copy)
    xin = torch.randn(32, 512, device="cuda", requires_grad=True)
    fillers = [torch.full((256, 1024), 3.0, device="cuda") for _ in range(8)]  # reuse the cache between steps
    out_e, out_g = eager(xin), graphed(xin)
    out_e.square().sum().backward()
    out_g.square().sum().backward()
    del fillers
ok_out = torch.allclose(out_e, out_g, atol=1e-4)
ok_grad = all(torch.allclose(pe.grad, pg.grad, rtol=1e-4, atol=1e-3) for pe, pg in zip(eager.parameters(), graphed.parameters()))
check(ok_out and ok_grad, "make_graphed_callables: outputs and gradients equal eager's (%s, %s)" % (ok_out, ok_grad))

# torch.compile (Inductor, no CUDA graphs) under vram
net = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)).cuda()
xc = torch.randn(32, 256, device="cuda")
try:
    compiled = torch.compile(net)
    check(torch.allclose(compiled(xc), net(xc), atol=1e-4), "torch.compile'd module matches eager")
except Exception as e:
    check(False, "torch.compile under vram: %s: %s" % (type(e).__name__, str(e)[:300]))

# torch.compile(mode="reduce-overhead"): Inductor's CUDA graph trees, their pool calls answered by
# vram (vram_torch/graph_trees.py). bench/graph_trees_workout.py runs, in a process of its own
# under vram, two compiled modules and a compiled loss in one tree (inference with fixed shapes,
# training after the first replayed, a new input shape, eval, a compiled loss recorded while the
# compiled forward's outputs live), every output and gradient against eager and 8 tensors
# allocated after each call checked for overwrites by a replay; each new recording after
# replays restores the pool's checkpoint (vram recreates the blocks, the live outputs' storages
# adopt theirs), and once the trees are reset no recreated block is left allocated.
try:
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "workout.json")
        out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "graph_trees_workout.py"), "vram", "--json",
                              report], capture_output=True, text=True, timeout=900,
                             env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python")))
        res = json.load(open(report)) if os.path.exists(report) else {}
    phases = res.get("phases", [])
    print(out.stdout[-1500:])
    check(out.returncode == 0 and len(phases) == 6 and all(p["matched"] for p in phases),
          "reduce-overhead, six phases in one tree: every output and gradient equal eager's (%s)"
          % ([(p["phase"], p["matched"], p["error"]) for p in phases] or out.stderr[-600:]))
    check(res.get("replays_overwrote") == 0 and res.get("slow_path_asserts") is True,
          "no tensor allocated between calls overwritten by a replay; the trees' pool checks ran (Inductor's default)")
    counts = res.get("vram_restores", {})
    check(res.get("restores", 0) >= 4 and counts.get("restores") == res.get("restores") and counts.get("adopted", 0) > 0,
          "the trees restored the pool's checkpoint through vram (%s restores; %s)" % (res.get("restores"), counts))
    check(res.get("vram_recreated_left") == 0 and counts.get("recreated") == sum(
          counts.get(k, 0) for k in ("freed_raw_delete", "freed_dead", "freed_remove_deleter")),
          "every block a restore recreated was freed by the end (%s)" % counts)
except Exception as e:
    check(False, "torch.compile(mode='reduce-overhead') under vram: %s: %s" % (type(e).__name__, str(e)[:400]))

# torch.cuda.MemPool: PyTorch 2.11 refuses to create one under any pluggable allocator
# ("pluggable does not yet support createOrIncrefPool", what docs/pytorch.md says); should a later
# PyTorch allow it, use_mem_pool calls the torch._C pool functions vram now answers, and then
# allocations inside the context are the pool's while it lasts, values stay right and the memory
# comes back once the tensors and the pool are gone.
try:
    mem_pool = None
    if hasattr(torch.cuda, "MemPool"):
        try:
            mem_pool = torch.cuda.MemPool()
        except RuntimeError as e:
            check("createOrIncrefPool" in str(e), "torch.cuda.MemPool() under vram: PyTorch's refusal, as documented: %s"
                  % str(e)[:120])
    if mem_pool is not None:
        gc.collect()
        torch.cuda.synchronize()
        allocated0 = vram_torch.memory_allocated()
        with torch.cuda.use_mem_pool(mem_pool):
            inside = torch.full((1 << 20,), 5.0, device="cuda")
            scratch = torch.ones(1 << 20, device="cuda")
            del scratch
            routed = any(b.get("graph_pool") and b["address"] == inside.data_ptr()
                         for seg in vram_torch.snapshot()["segments"] for b in seg["blocks"])
        outside = torch.full((1 << 20,), 6.0, device="cuda")
        torch.cuda.synchronize()
        print("use_mem_pool: the block allocated inside is in a vram pool: %s" % routed)
        check(bool((inside == 5.0).all()) and bool((outside == 6.0).all()), "use_mem_pool: tensors inside and after right")
        del inside, outside, mem_pool
        gc.collect()
        torch.cuda.synchronize()
        check(vram_torch.memory_allocated() == allocated0, "use_mem_pool: the memory comes back: %d -> %d"
              % (allocated0, vram_torch.memory_allocated()))
except Exception as e:
    check(False, "torch.cuda.MemPool / use_mem_pool under vram: %s: %s" % (type(e).__name__, str(e)[:400]))

# `python -m vram_torch run`: an unchanged program under vram, its own torch.cuda calls answered.
with tempfile.TemporaryDirectory() as tmp:
    prog = os.path.join(tmp, "prog.py")
    with open(prog, "w") as f:
        f.write("import sys, torch, vram_torch\n"
                "print('before', torch.cuda.memory_stats()['allocated_bytes.all.peak'], torch.cuda.max_memory_allocated())\n"
                "x = torch.ones(1 << 20, device='cuda')\n"
                "print('enabled', vram_torch.is_enabled(), 'peak', torch.cuda.max_memory_allocated(), 'arg', sys.argv[1])\n")
    out = subprocess.run([sys.executable, "-m", "vram_torch", "run", "--summary", prog, "hello"], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python")))
    check(out.returncode == 0 and "enabled True" in out.stdout and "arg hello" in out.stdout,
          "vram_torch run: %r %r" % (out.stdout, out.stderr[-300:]))
    peak = int(out.stdout.split("peak ")[1].split()[0]) if "peak " in out.stdout else 0
    check(peak >= 4 << 20, "the program's torch.cuda.max_memory_allocated() is vram's: %d" % peak)
    check("Allocated memory" in out.stderr, "--summary prints vram's memory summary")
    check("before 0 0" in out.stdout, "before any tensor every statistic is there, at zero: %r" % out.stdout[:200])

# PyTorch's allocator settings under vram (src/torch/torch_conf.cpp): a script that sets
# PYTORCH_ALLOC_CONF, and calls torch.cuda.memory._set_allocator_settings, before its first CUDA
# tensor, run unchanged under `python -m vram_torch run`, keeps them; one that PyTorch would run on cudaMallocAsync says that setting is left out, once.
with tempfile.TemporaryDirectory() as tmp:
    prog = os.path.join(tmp, "prog.py")
    with open(prog, "w") as f:
        f.write("import os\nos.environ['PYTORCH_ALLOC_CONF'] = 'expandable_segments:False,garbage_collection_threshold:0.6'\n"
                "import torch, vram_torch\ntorch.cuda.memory._set_allocator_settings('roundup_power2_divisions:4')\n"
                "x = torch.ones(1 << 20, device='cuda')\n"
                "print('conf', vram_torch.alloc_conf())\n"
                "print('expandable', any(s['is_expandable'] for s in torch.cuda.memory._snapshot()['segments']))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    for v in ("VRAM_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        env.pop(v, None)
    out = subprocess.run([sys.executable, "-m", "vram_torch", "run", prog], capture_output=True, text=True, env=env)
    check(out.returncode == 0 and "expandable_segments:False" in out.stdout and "garbage_collection_threshold:0.6" in out.stdout
          and "roundup_power2_divisions:4" in out.stdout and "expandable False" in out.stdout,
          "PYTORCH_ALLOC_CONF set by the script applies under vram: %r %r" % (out.stdout, out.stderr[-300:]))
    print("PYTORCH_ALLOC_CONF under vram:", out.stdout.strip().replace("\n", " | "))
    out = subprocess.run([sys.executable, "-m", "vram_torch", "run", prog], capture_output=True, text=True,
                         env=dict(env, PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync"))
    print("PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync under vram: rc %d, %r" % (out.returncode, out.stderr[-400:]))
    check(out.returncode == 0 and out.stderr.count("vram: ") == 1
          and "PYTORCH_CUDA_ALLOC_CONF's backend:cudaMallocAsync left out" in out.stderr
          and "PYTORCH_ALLOC_CONF (expandable_segments:False,garbage_collection_threshold:0.6) left out" in out.stderr
          and "expandable True" in out.stdout,
          "PYTORCH_CUDA_ALLOC_CONF, which PyTorch reads first, applies; what is left out is said once: %r %r"
          % (out.stdout, out.stderr[-400:]))
# Which of its two variables PyTorch itself reads when both are set (vram reads PYTORCH_CUDA_ALLOC_CONF
# first, as run 134 found PyTorch 2.11 does): told by its own expandable segments, under PyTorch's allocator.
code = ("import torch; x = torch.ones(1 << 20, device='cuda');"
        "print('expandable', any(s.get('is_expandable') for s in torch.cuda.memory._snapshot()['segments']))")
seen = {}
for alloc_conf, cuda_conf in (("expandable_segments:True", "expandable_segments:False"),
                              ("expandable_segments:False", "expandable_segments:True")):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(env, PYTORCH_ALLOC_CONF=alloc_conf, PYTORCH_CUDA_ALLOC_CONF=cuda_conf))
    seen[alloc_conf] = out.stdout.strip() or out.stderr[-200:]
print("PyTorch with both variables set:", seen)
check(seen.get("expandable_segments:True") == "expandable False" and seen.get("expandable_segments:False") == "expandable True",
      "PyTorch reads PYTORCH_CUDA_ALLOC_CONF before PYTORCH_ALLOC_CONF, as vram does: %s" % seen)

# enable() after CUDA use: a clear error (in a fresh process).
code = ("import sys; sys.path.insert(0, %r); import torch, vram_torch; torch.ones(1, device='cuda');\n"
        "try:\n    vram_torch.enable()\nexcept RuntimeError as e:\n    print('REFUSED', e)\n") % os.path.join(REPO, "python")
out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
check("REFUSED" in out.stdout and "before" in out.stdout, "enable() after CUDA use is refused: %r %r" % (out.stdout, out.stderr[-300:]))

# python -m vram_torch record
with tempfile.TemporaryDirectory() as d:
    script = os.path.join(d, "prog.py")
    with open(script, "w") as f:
        f.write("import sys, torch\nxs=[torch.empty(int(sys.argv[1]), device='cuda') for _ in range(5)]\n"
                "del xs\ny = torch.randn(256, 256, device='cuda') @ torch.randn(256, 256, device='cuda')\n")
    trace = os.path.join(d, "run.trace")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    out = subprocess.run([sys.executable, "-m", "vram_torch", "record", "-o", trace, script, "1000"],
                         capture_output=True, text=True, env=env)
    check(out.returncode == 0, "record exits 0: %s" % out.stderr[-500:])
    lines = open(trace).read().splitlines() if os.path.exists(trace) else []
    check(lines[:1] == ["# memtrace v1"], "memtrace header")
    allocs = [l for l in lines if l.startswith("a ")]
    frees = [l for l in lines if l.startswith("f ")]
    check(len(allocs) >= 8, "the program's allocations are recorded: %d" % len(allocs))
    check(any(l.split()[2] == "4000" for l in allocs), "requested sizes (1000 floats = 4000 bytes)")
    check(len(frees) >= 5, "frees recorded")
    check([int(l.split()[1]) for l in allocs] == list(range(len(allocs))), "dense new ids")
    check(any(l.startswith("# peak_requested_bytes:") for l in lines), "peak_requested_bytes header")
    check(any(l.startswith("# pytorch_native_peak_reserved_bytes:") for l in lines), "native peak header")
    print("\n".join(lines[:8]))
    # the header names the allocator in effect when recording started: under
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True from the environment, expandable; a program
    # that sets it itself (too late) is recorded under native, with a warning
    for conf_env, in_prog, want in (("expandable_segments:True", False, "expandable_segments"),
                                    (None, True, "native")):
        with open(script, "w") as f:
            if in_prog:
                f.write("import os\nos.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'\n")
            f.write("import torch\nx = torch.empty(1 << 20, device='cuda')\ndel x\n")
        env2 = dict(env)
        env2.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf_env:
            env2["PYTORCH_CUDA_ALLOC_CONF"] = conf_env
        out = subprocess.run([sys.executable, "-m", "vram_torch", "record", "-o", trace, script],
                             capture_output=True, text=True, env=env2)
        head = open(trace).read() if out.returncode == 0 and os.path.exists(trace) else ""
        check("# pytorch_%s_peak_reserved_bytes:" % want in head,
              "record labels the allocator %s (%s): %s" % (want, "set in the program" if in_prog else "from the environment",
                                                           out.stderr[-300:]))
        check(("after the allocator had started" in out.stderr) == in_prog,
              "record warns exactly when the program sets PYTORCH_CUDA_ALLOC_CONF: %r" % out.stderr[-300:])

    # stopped by SIGTERM (as torchrun stops the other ranks) while the main thread waits in
    # torch.cuda.synchronize() behind a 20-second kernel: the partial trace is written and the
    # process dies by SIGTERM within seconds, not after the kernel (record's watcher thread)
    with open(script, "w") as f:
        f.write("import os, signal, threading, torch\nxs = [torch.empty(1000, device='cuda') for _ in range(3)]\n"
                "torch.cuda._sleep(int(20 * 2e9))\nthreading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
                "torch.cuda.synchronize()\nprint('not stopped')\n")
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "vram_torch", "record", "-o", trace, script],
                         capture_output=True, text=True, env=env, timeout=120)
    took = time.time() - t0
    lines = open(trace).read().splitlines() if os.path.exists(trace) else []
    check(out.returncode == -signal.SIGTERM and took < 15 and "not stopped" not in out.stdout
          and "# partial: the program was stopped by SIGTERM; the trace stops where it did" in lines
          and sum(l.startswith("a ") for l in lines) >= 3,
          "record stopped by SIGTERM in a CUDA wait: status %d after %.1f s, %d lines: %r"
          % (out.returncode, took, len(lines), out.stderr[-300:]))

sys.exit(done("test_torch_plugin"))

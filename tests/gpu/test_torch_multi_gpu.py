"""test_torch_multi_gpu.py — vram_torch on two GPUs: one allocator per device. Tensors computed
on each device and copied between them; each device's statistics count only its own tensors;
empty_cache on one device returns that device's cache (cudaMemGetInfo) and leaves the other's;
_record_memory_history and _snapshot cover both devices, as under PyTorch;
a per-device memory limit gives torch.OutOfMemoryError on that device only; a side stream on
the second device with record_stream; nn.DataParallel over both (one thread per device, so the
allocators are used concurrently) gives the single-device result; DistributedDataParallel over
NCCL in two processes started by torchrun with `-m vram_torch run` (the documented launch of an
unchanged DDP script) trains, each rank under vram, with the losses of the same run under
PyTorch's own allocator, and so does the job whose script starts its workers itself
(torch.multiprocessing.spawn). Exits 77 (skipped) without torch, two GPUs or libvram_torch.so.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from pycheck import check, done  # noqa: E402
from torch_setup import start  # noqa: E402

torch, vram_torch = start(min_devices=2)
MiB = 2**20
REPO = os.path.dirname(os.path.dirname(HERE))

# Compute on each device, and across them.
torch.manual_seed(0)
a_cpu, b_cpu = torch.randn(512, 512), torch.randn(512, 512)
ref = a_cpu.double() @ b_cpu.double()
outs = []
for d in (0, 1):
    a, b = a_cpu.to(f"cuda:{d}"), b_cpu.to(f"cuda:{d}")
    c = a @ b
    check(c.device.index == d, "result on cuda:%d" % d)
    check(torch.allclose(c.double().cpu(), ref, rtol=1e-3, atol=1e-3), "matmul on cuda:%d is right" % d)
    outs.append(c)
moved = outs[0].to("cuda:1")
check(torch.equal(moved, outs[1]) or torch.allclose(moved, outs[1], rtol=1e-5, atol=1e-4),
      "a tensor copied cuda:0 -> cuda:1 equals the one computed there")
check(vram_torch.memory_allocated(0) > 0 and vram_torch.memory_allocated(1) > 0, "both devices have an allocator in use")

# Each device counts only its own tensors.
base0, base1 = vram_torch.memory_allocated(0), vram_torch.memory_allocated(1)
x = torch.empty(300 * MiB, dtype=torch.uint8, device="cuda:1")
check(vram_torch.memory_allocated(1) - base1 >= 300 * MiB, "300 MiB counted on cuda:1")
check(vram_torch.memory_allocated(0) == base0, "and not on cuda:0 (%d -> %d)" % (base0, vram_torch.memory_allocated(0)))
with torch.cuda.device(1):
    y = torch.empty(100 * MiB, dtype=torch.uint8, device="cuda")  # the current device
check(y.device.index == 1 and vram_torch.memory_allocated(1) - base1 >= 400 * MiB, "current device 1 counts on cuda:1")
check(vram_torch.max_memory_allocated(1) >= vram_torch.memory_allocated(1), "peak on cuda:1")
check("allocated_bytes.all.current" in vram_torch.memory_stats(1), "memory_stats(1)")
check(torch.cuda.memory_allocated(1) == vram_torch.memory_allocated(1) and
      torch.cuda.memory_allocated("cuda:0") == vram_torch.memory_allocated(0), "torch.cuda's functions per device (routed)")
s1 = vram_torch.memory_summary(1)
check("device ID 1" in s1 or "cuda:1" in s1 or "device 1" in s1.lower(), "memory_summary(1) names device 1")
# The memory visualizer's view, as under PyTorch: the history is process-wide and _snapshot()
# lists every device's segments, each device's events at its index.
torch.cuda.memory._record_memory_history(max_entries=100)
z = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda:1")
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
check({s["device"] for s in snap["segments"]} >= {0, 1}, "_snapshot() has both devices' segments")
check(z.data_ptr() in [e["addr"] for e in snap["device_traces"][1] if e["action"] == "alloc"],
      "cuda:1's allocation is in device_traces[1]")
del z

# empty_cache on one device returns that device's cache only.
del x, y
torch.cuda.synchronize(0)
torch.cuda.synchronize(1)
cached1 = vram_torch.memory_reserved(1) - vram_torch.memory_allocated(1)
reserved0 = vram_torch.memory_reserved(0)
free_before, _ = torch.cuda.mem_get_info(1)
vram_torch.empty_cache(1)
free_after, _ = torch.cuda.mem_get_info(1)
check(cached1 >= 400 * MiB - 2 * MiB, "400 MiB cached on cuda:1: %d" % cached1)
check(free_after - free_before >= cached1 - 8 * MiB, "empty_cache(1) returned %d of %d bytes on cuda:1"
      % (free_after - free_before, cached1))
check(vram_torch.memory_reserved(0) == reserved0, "cuda:0's cache untouched (%d -> %d)" % (reserved0, vram_torch.memory_reserved(0)))

# A limit on one device: out of memory there only.
vram_torch.set_per_process_memory_fraction(0.01, device=1)  # ~1.4 GiB of an H200
oom = False
try:
    big = torch.empty(8 * 2**30, dtype=torch.uint8, device="cuda:1")
except torch.OutOfMemoryError:
    oom = True
check(oom, "8 GiB under a 1% limit on cuda:1 is torch.OutOfMemoryError")
ok0 = torch.empty(8 * 2**30, dtype=torch.uint8, device="cuda:0")
check(ok0.numel() == 8 * 2**30, "cuda:0 still serves 8 GiB")
del ok0
small = torch.ones(MiB, device="cuda:1")
check(float(small.sum()) == MiB, "cuda:1 serves what fits after its OOM")
vram_torch.set_per_process_memory_fraction(1.0, device=1)
del small

# A side stream on cuda:1, with record_stream.
with torch.cuda.device(1):
    side = torch.cuda.Stream()
    t = torch.ones(4 * MiB, device="cuda:1")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        u = t * 3
    vram_torch.record_stream(t, side)
    del t
    torch.cuda.synchronize()
check(float(u.sum()) == 12 * MiB, "record_stream on cuda:1's side stream")
del u

# DataParallel: the replicas run in one thread per device, each allocating on its own device.
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).to("cuda:0")
inp = torch.randn(256, 256, device="cuda:0")
with torch.no_grad():
    single = model(inp)
    for _ in range(3):
        multi = torch.nn.DataParallel(model, device_ids=[0, 1])(inp)
check(torch.allclose(single, multi, rtol=1e-4, atol=1e-4), "DataParallel over cuda:0 and cuda:1 matches one device")
check(vram_torch.max_memory_allocated(1) > 0, "DataParallel allocated on cuda:1 through vram")

# DistributedDataParallel: two processes, one GPU each, NCCL; the script is unchanged, vram comes
# from the launch (torchrun -m vram_torch run SCRIPT). Each rank writes what it saw to a file (torchrun
# may prefix its workers' output lines).
DDP_WORKER = """
import json, os, sys, torch, torch.distributed as dist


def main(rank, out):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    torch.manual_seed(1 + rank)  # each rank its own data
    losses = []
    for step in range(5):
        x, y = torch.randn(64, 256, device="cuda"), torch.randn(64, 64, device="cuda")
        loss = ((ddp(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    both = [torch.empty_like(flat) for _ in range(2)]
    dist.all_gather(both, flat)
    vt = sys.modules.get("vram_torch")
    on = bool(vt and vt.is_enabled())
    report = {"losses": losses, "same_params": bool(torch.equal(both[0], both[1])), "vram": on,
              "peak": vt.max_memory_allocated(rank) if on else 0,
              "devices": sorted({seg["device"] for seg in vt.snapshot()["segments"]}) if on else []}
    dist.destroy_process_group()
    json.dump(report, open(os.path.join(out, "rank%d.json" % rank), "w"))


if __name__ == "__main__":
    if sys.argv[2] == "torchrun":
        main(int(os.environ["LOCAL_RANK"]), sys.argv[1])
    else:  # the workers started by the script itself
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[3])
        torch.multiprocessing.spawn(main, args=(sys.argv[1],), nprocs=2)
"""


def ddp_run(tmp, use_vram, how="torchrun"):
    """The DDP job, started by torchrun or by the script itself (torch.multiprocessing.spawn), under
    vram (`-m vram_torch run`) or PyTorch's allocator: its exit and each rank's report."""
    out = os.path.join(tmp, "%s-%s" % (how, "vram" if use_vram else "native"))
    os.makedirs(out)
    worker = os.path.join(tmp, "ddp_worker.py")
    with open(worker, "w") as f:
        f.write(DDP_WORKER)
    launch = ["-m", "vram_torch", "run", worker] if use_vram else [worker]
    path = os.pathsep.join(p for p in (os.path.join(REPO, "python"), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, VRAM_TORCH_LIBRARY=vram_torch.library_path())
    runner = [sys.executable] + (["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
                                 if how == "torchrun" else [])
    with socket.socket() as s:  # a free port for the workers the script starts itself (torchrun finds its own)
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    proc = subprocess.run(runner + launch + [out, how, port], capture_output=True, text=True, timeout=300, env=env)
    ranks = [json.load(open(os.path.join(out, "rank%d.json" % r))) for r in (0, 1)
             if os.path.exists(os.path.join(out, "rank%d.json" % r))]
    return proc, ranks


def same_losses(a, b):
    """Two ranks' losses equal within float32 rounding (vram changes no arithmetic)."""
    return max(abs(x - y) for x, y in zip(a["losses"], b["losses"])) <= 1e-5 * max(1.0, abs(b["losses"][0]))


with tempfile.TemporaryDirectory() as tmp:
    proc, ranks = ddp_run(tmp, True)
    check(proc.returncode == 0 and len(ranks) == 2, "torchrun -m vram_torch run: two DDP ranks ran (%d): %s"
          % (proc.returncode, proc.stderr[-800:]))
    check(all(r["vram"] and r["peak"] > 0 for r in ranks), "each rank allocated through vram: %s"
          % [(r["vram"], r["peak"]) for r in ranks])
    check([r["devices"] for r in ranks] == [[0], [1]],
          "each rank's memory is on its own GPU: %s" % [r["devices"] for r in ranks])
    check(all(r["same_params"] for r in ranks), "DDP kept the two ranks' parameters equal")
    nproc, native = ddp_run(tmp, False)
    check(nproc.returncode == 0 and len(native) == 2, "the same under PyTorch's allocator: %s" % nproc.stderr[-400:])
    for r, n in zip(ranks, native):
        check(same_losses(r, n), "DDP losses under vram equal native's: %s vs %s" % (r["losses"], n["losses"]))
    # The same job with workers the script starts itself (torch.multiprocessing.spawn): fresh
    # interpreters, which vram_torch's spawn hook enables (python/vram_torch/spawn.py).
    sproc, spawned = ddp_run(tmp, True, "spawn")
    check(sproc.returncode == 0 and len(spawned) == 2 and all(r["vram"] and r["peak"] > 0 for r in spawned),
          "torch.multiprocessing.spawn workers run under vram: %s %s"
          % ([(r["vram"], r["peak"]) for r in spawned], sproc.stderr[-600:]))
    check(len(spawned) == 2 and all(same_losses(r, t) for r, t in zip(spawned, ranks)), "and train as the torchrun job did")

sys.exit(done("test_torch_multi_gpu"))

"""test_torch_categories.py — memory by category, the leak finder and explain_oom under a real
PyTorch on a GPU (vram_torch.track): an MLP trained with AdamW, whose categories must add up to
the allocated bytes at every phase's peak and step end, whose parameters, gradients and optimizer
state (requested bytes) must equal numel x element size of what the model and optimizer hold,
with activations in forward and gradients in backward; a list keeping each step's output flagged
as a leak by step 3 with this file's line in its stack, and none before it; inference steps by
mark_step; an out-of-memory whose torch.OutOfMemoryError names the categories and whose
explain_oom() plans the batch halved. Exits 77 (skipped) without torch or a GPU.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from pycheck import check, done  # noqa: E402
from torch_setup import start  # noqa: E402

torch, vt = start(min_devices=1)
from vram_torch import category_report as cr  # noqa: E402

tracker = vt.track(leaks=True, program=["test_torch_categories.py"])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024),
                            torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 10)).cuda()
model.register_buffer("scale", torch.ones(1024, device="cuda"))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
kept = []
for step in range(5):
    x = torch.randn(512, 1024, device="cuda")
    y = torch.randint(0, 10, (512,), device="cuda")
    opt.zero_grad(set_to_none=True)
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    st = vt.memory_stats()
    tags = {t: st["tags.%s.requested_bytes.current" % t] for t in ("parameter", "gradient", "optimizer_state", "buffer")}
    check(tags["parameter"] == param_bytes, "step %d: parameters %d = numel x size %d" % (step, tags["parameter"], param_bytes))
    check(tags["gradient"] == param_bytes, "step %d: gradients %d = %d" % (step, tags["gradient"], param_bytes))
    held = {v.untyped_storage().data_ptr(): v.untyped_storage().nbytes() for s in opt.state.values()
            for v in s.values() if isinstance(v, torch.Tensor) and v.is_cuda}
    check(tags["optimizer_state"] == sum(held.values()) >= 2 * param_bytes, "step %d: AdamW state %d = what it holds %d"
          % (step, tags["optimizer_state"], sum(held.values())))
    check(tags["buffer"] == 1024 * 4, "step %d: the buffer %d" % (step, tags["buffer"]))
    total = sum(st.get("tags.%s.allocated_bytes.current" % t, 0) for t in
                ("other", "parameter", "gradient", "optimizer_state", "activation", "temporary", "kv_cache", "buffer"))
    check(total == st["allocated_bytes.all.current"], "step %d: tags add up to allocated %d (%d)"
          % (step, st["allocated_bytes.all.current"], total))
    if step >= 2:
        kept.append(out)  # the planted leak: every step's output kept (from step 3 on)
    leaks = vt.leaks()
    if step <= 2:
        check(not leaks, "step %d: no leak yet (%s)" % (step + 1, leaks))
with open(__file__) as f:  # the line of `out = model(x)`, where the kept outputs were allocated
    LEAK_LINE = [i for i, line in enumerate(f, 1) if line.strip() == "out = model(x)"][0]
leaks = vt.leaks()
check(len(leaks) >= 1, "the kept outputs are flagged: %s" % leaks)
check(any(os.path.basename(fr[0]) == "test_torch_categories.py" and fr[1] == LEAK_LINE for g in leaks for fr in g["stack"]),
      "with this file's line %d in the stack: %s" % (LEAK_LINE, [g["where"] for g in leaks]))
check(all(g["first_step"] <= 5 for g in leaks), "flagged within 3 steps of the leak's start")

rec = vt.categories()
check(len(rec["steps"]) == 5, "five steps: %d" % len(rec["steps"]))
check(not cr.check_sums(rec), "categories add up at every phase peak and step end: %s" % cr.check_sums(rec)[:3])
s3 = rec["steps"][2]["phases"]
check(set(s3) >= {"forward", "backward", "optimizer"}, "phases of step 3: %s" % sorted(s3))
check(s3["forward"]["own_peak"]["activations"] > 0, "activations in forward")
check(s3["backward"]["own_peak"]["gradients"] >= param_bytes, "gradients in backward")
check(s3["optimizer"]["at_peak_allocated"]["optimizer_state"] >= 2 * param_bytes, "optimizer state in the step")
check(rec["run"]["peak_reserved"] >= rec["run"]["peak_allocated"], "reserved >= allocated")
print(cr.format_table(rec))

# inference: steps by mark_step
n0 = len(vt.categories()["steps"])
with torch.no_grad():
    for _ in range(3):
        model(torch.randn(256, 1024, device="cuda"))
        vt.mark_step()
check(len(vt.categories()["steps"]) == n0 + 3, "mark_step ends steps")

# out of memory: the message names the categories; explain_oom plans the remedies
del kept[:]
torch.cuda.empty_cache()
vt.set_per_process_memory_fraction(min(1.0, (vt.memory_allocated() + (256 << 20)) / torch.cuda.mem_get_info()[1]))
message = ""
try:
    x = torch.randn(65536, 1024, device="cuda")
    model(x).sum().backward()
except torch.OutOfMemoryError as e:
    message = str(e)
check("vram categories at the failure" in message, "the OOM message names the categories: %r" % message[-300:])
ex = vt.explain_oom()
check(ex is not None and ex["remedies"][0]["name"] == "batch halved", "explain_oom plans the batch halved: %s" % ex)
check(ex["remedies"][0]["peak_allocated"] < ex["step_peak_allocated"], "halving plans less than the failed step")
sys.exit(done("test_torch_categories"))

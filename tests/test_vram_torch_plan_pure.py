#!/usr/bin/env python3
"""Tests of issue 39's pure-Python parts, no PyTorch: the leak finder on recorded blocks (the
three classic leaks flagged at the third boundary with their line; steady training, a new input
each step, varying lengths and reused addresses not flagged), explain_oom's remedies on recorded
figures, the categories record (windows, merge, sums, table, JSON in and out), fit's lenient rule
for library workspaces, and `python -m vram_torch fit -- train.py {batch}` end to end with a
stand-in for the program's runs (fit_run.child_command pointed at a script that writes the runs'
results and a synthetic program's trace): two recordings, the search by replay, one confirming
run, and the bad input that must be refused before anything runs.

    python3 tests/test_vram_torch_plan_pure.py VRAM_EXE
"""
import io
import json
import os
import subprocess
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)
from pycheck import check, done  # noqa: E402
from vram_torch import category_report as cr, fit, fit_run, forward_shapes, oom_explain  # noqa: E402
from vram_torch.leak_finder import LeakFinder, where  # noqa: E402

VRAM = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("VRAM", "vram")

# --- the leak finder ---------------------------------------------------------------------------
TORCH = ("/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 125, "forward")


def frames(line, fn="main"):
    return [TORCH, ("/home/u/train.py", line, fn)]


def steady_blocks(step, extra=()):
    """Live blocks at a step boundary of steady training: parameters, gradients (no Python stack),
    optimizer state, the current input at an address that changes, a loss."""
    blocks = [{"address": 0x1000 + 0x100 * i, "size": 4096, "category": "parameters", "frames": frames(10)}
              for i in range(4)]
    blocks += [{"address": 0x9000 + 0x100 * i, "size": 4096, "category": "gradients", "frames": []} for i in range(4)]
    if step >= 1:
        blocks += [{"address": 0x20000 + 0x100 * i, "size": 8192, "category": "optimizer_state", "frames": frames(30)}
                   for i in range(4)]
    blocks.append({"address": 0x40000 + 0x1000 * (step % 2), "size": 1024 * (1 + step % 3), "category": "other",
                   "frames": frames(20)})  # the batch: a new tensor, sometimes larger, at one of two addresses
    blocks.append({"address": 0x50000, "size": 512, "category": "temporaries", "frames": frames(22)})
    return blocks + list(extra)


def run_finder(leak_from=None, kind="list", steps=6):
    f = LeakFinder()
    kept = []
    for s in range(1, steps + 1):
        if leak_from is not None and s >= leak_from:
            kept.append({"address": 0x100000 + 0x10000 * s, "size": 65536, "category":
                         "activations" if kind != "hook" else "temporaries", "frames": frames(21)})
        f.observe(s, steady_blocks(s, kept))
        if leak_from is not None and s == leak_from + 1:
            check(not f.leaks(), "%s leak: not flagged one step after it begins" % kind)
    return f


f = run_finder()
check(not f.leaks() and "none" in f.report(), "steady training: no leak (%s)" % f.leaks())
for kind in ("sum_loss", "list", "hook"):
    f = run_finder(leak_from=2, kind=kind)
    leaks = f.leaks()
    check(len(leaks) == 1 and leaks[0]["first_step"] == 4, "%s leak from step 2: flagged at step 4 (%s)" % (kind, leaks))
    check(leaks and leaks[0]["where"] == "train.py:21 main" and leaks[0]["bytes_per_step"] == 65536,
          "%s: named by its line, 64 KiB a step: %s" % (kind, leaks[:1]))
check("+0.06 MiB a step" in run_finder(leak_from=2).report(), "the report says the growth")
short = LeakFinder()
short.observe(1, steady_blocks(1))
check("2 are needed" not in short.report() and "3 are needed" in short.report(), "too few boundaries said")
check(where([]) .startswith("no Python stack") and where(frames(5)) == "train.py:5 main", "where()")
# a block freed and made again at the same address and size each step is the same block: no growth
f = LeakFinder()
for s in range(1, 6):
    f.observe(s, steady_blocks(s, [{"address": 0x70000, "size": 4096, "category": "activations", "frames": frames(40)}]))
check(not f.leaks(), "a buffer remade at the same place is not a leak")

# --- explain_oom -------------------------------------------------------------------------------
MiB = 1 << 20
oom = {"step": 1, "phase": "forward", "request": 100 * MiB, "limit": 1000 * MiB, "allocated": 900 * MiB,
       "reserved": 990 * MiB, "trainable_bytes": 100 * MiB, "optimizers": ["AdamW"], "forward_progress": 0.5,
       "categories": {"parameters": 100 * MiB, "buffers": 0, "gradients": 0, "optimizer_state": 0,
                      "activations": 600 * MiB, "temporaries": 150 * MiB, "other": 50 * MiB}, "last_step": None}
ex = oom_explain.explain(oom)
# variable: 600/0.5 + 150 + 50 + 100 = 1500, + backward's start 1.5 x the largest (the 100 MiB request)
# = 1650; halved: 100 + 200 (AdamW, known by name only) + 100 (grads) + 825 = 1225 MiB
check(ex["remedies"][0]["peak_allocated"] == 1225 * MiB, "batch halved: %d MiB" % (ex["remedies"][0]["peak_allocated"] // MiB))
check(ex["remedies"][0]["peak_reserved"] == int(1225 * MiB * 1.1) and not ex["remedies"][0]["fits"],
      "reserved at the failure's ratio; does not fit 1000 MiB")
check(ex["reserved_but_free"] == 90 * MiB and "reserved but free: 90.00 MiB" in "\n".join(ex["lines"]), "reserved but free")
check(oom_explain.explain(None) is None, "no OOM, no explanation")
# a failure in step 1's forward: no backward seen, so the step is an estimate, and said with its basis
text = "\n".join(ex["lines"])
check(ex["estimate"] and all(r["estimate"] for r in ex["remedies"]) and "ESTIMATE" in text
      and "50% of it done" in text and "1.5 x the largest recent tensor (100.00 MiB" in text
      and "peak ~1225.00 MiB allocated" in text, "first-step forward failure: an estimate, its basis said: %s" % text)
# the optimizers known from their construction: their state by class and settings
check(oom_explain.state_bytes([{"name": "SGD", "param_bytes": 100}, {"name": "SGD", "param_bytes": 10, "momentum": True},
                               {"name": "Adam", "param_bytes": 1000, "amsgrad": True}, {"name": "AdamW", "param_bytes": 7},
                               {"name": "RMSprop", "param_bytes": 5, "momentum": True, "centered": True}])
      == 0 + 10 + 3000 + 14 + 15, "state_bytes by class and settings")
plain_sgd = oom_explain.explain(dict(oom, optimizers=["SGD"], largest_recent=300 * MiB,
                                     optimizer_info=[{"name": "SGD", "param_bytes": 120 * MiB}]))
# SGD without momentum makes no state; gradients: the optimizer's 120 MiB; backward's start 1.5 x 300 MiB
# saved: halved 100 + 0 + 120 + (1500 + 450) / 2 = 1195 MiB
check(plain_sgd["remedies"][0]["peak_allocated"] == 1195 * MiB, "SGD, no momentum: %d MiB"
      % (plain_sgd["remedies"][0]["peak_allocated"] // MiB))
# the rest of forward as it lately went: 10 modules with parameters to run at 20 MiB each: 600 + 200
# activations, + 150 + 50 + 100, + 1.5 x 100: halved 100 + 200 + 100 + 625 = 1025 MiB
rested = oom_explain.explain(dict(oom, forward_rest=[10, 20.0 * MiB]))
check(rested["remedies"][0]["peak_allocated"] == 1025 * MiB and "800.00 MiB (10 modules with parameters still to run, "
      "20.00 MiB each" in "\n".join(rested["lines"]), "the rest of forward at its recent rate: %d MiB: %s" % (
          rested["remedies"][0]["peak_allocated"] // MiB, rested["lines"][3][:300]))
# the rest of a convolutional forward by its output shapes (forward_shapes.py): ResNet-50's layer3,
# layer4 and head as torchvision registers them, after layer2 (512 channels at 28 x 28)
def conv(cin, cout, k, stride):
    return {"kind": "conv", "in": cin, "out": cout, "kernel": (k, k), "stride": (stride, stride),
            "padding": (k // 2, k // 2), "dilation": (1, 1)}


def bottlenecks(cin, mid, blocks, stride):
    out = []
    for b in range(blocks):
        s = stride if b == 0 else 1
        out += [conv(cin, mid, 1, 1), {"kind": "bn", "channels": mid}, conv(mid, mid, 3, s), {"kind": "bn", "channels": mid},
                conv(mid, 4 * mid, 1, 1), {"kind": "bn", "channels": 4 * mid}]
        if b == 0:  # the downsample: on the block's input, after bn3 in registration order
            out += [conv(cin, 4 * mid, 1, s), {"kind": "bn", "channels": 4 * mid}]
        cin = 4 * mid
    return out


rest = bottlenecks(512, 256, 6, 2) + bottlenecks(1024, 512, 3, 2) + [{"kind": "linear", "out": 1000}]
numel = forward_shapes.rest_numel(rest, {512: (28, 28), 128: (28, 28)}, 1)
# layer3: block 0 1,304,576 elements (its downsample on the 28 x 28 input), blocks 1-5 602,112 each;
# layer4: block 0 652,288, blocks 1-2 301,056 each; the head 1,000
check(numel is not None and len(numel) == len(rest) and sum(numel) == 1304576 + 5 * 602112 + 652288 + 2 * 301056 + 1000,
      "ResNet-50's layer3 and layer4 sized by their shapes: %s" % (sum(numel) if numel else None))
check(forward_shapes.rest_numel(rest, {128: (28, 28)}, 1) is None and forward_shapes.rest_numel([None], {}, 1) is None,
      "an input size not seen, or a module not known: no answer")
check(forward_shapes.conv_out(224, 7, 2, 3, 1) == 112 and forward_shapes.conv_out(56, 3, 2, 1, 1) == 28, "conv_out")
shaped = oom_explain.explain(dict(oom, forward_rest=[10, 20.0 * MiB], forward_rest_shapes=[10, 100 * MiB]))
# the shapes' answer before the rate: 600 + 100 activations, + 150 + 50 + 100 + 150: halved 100 + 200 + 100 + 575
check(shaped["remedies"][0]["peak_allocated"] == 975 * MiB and "by their output shapes" in "\n".join(shaped["lines"]),
      "the rest of forward by its shapes: %d MiB" % (shaped["remedies"][0]["peak_allocated"] // MiB))
# GPT-2 124M (bf16 autocast, AdamW) at batch 16 under 8 GiB on an H100 failed in step 1's forward
# allocating the loss's fp32 logits; its figures at the failure (bench/results/2026-12-06-torchplan-run2/
# oom_gpt2.json) and the run at batch 8 measured: 7,733 MiB allocated at its peak
gpt2 = {"step": 1, "phase": "forward", "request": int(1570.53 * MiB), "limit": 8192 * MiB,
        "allocated": int(8079.40 * MiB), "reserved": 8146 * MiB, "trainable_bytes": int(473.21 * MiB),
        "optimizers": [], "optimizer_info": [{"name": "AdamW", "param_bytes": int(473.21 * MiB)}],
        "forward_progress": 1.0, "forward_rest": [0, 0.0], "largest_recent": 0, "last_step": None,
        "categories": {"parameters": int(473.21 * MiB), "activations": int(6763.70 * MiB),
                       "temporaries": int(842.43 * MiB), "other": int(0.06 * MiB)}}
half = oom_explain.explain(gpt2)["remedies"][0]
check(abs(half["peak_allocated"] / (8108389888) - 1) <= 0.10 and half["fits"],
      "GPT-2's first-step failure: batch 8 estimated %.0f MiB, measured 7733 MiB" % (half["peak_allocated"] / MiB))
later = dict(oom, step=3, phase="backward", forward_progress=1.0,
             last_step={"phases": {"forward": {"peak_allocated": 800 * MiB, "at_peak_allocated": {"activations": 500 * MiB}},
                                   "backward": {"peak_allocated": 950 * MiB, "own_peak": {"optimizer_state": 0},
                                                "at_peak_allocated": {"activations": 700 * MiB, "temporaries": 50 * MiB}}}})
for w in later["last_step"]["phases"].values():
    w.setdefault("own_peak", {})
ex2 = oom_explain.explain(later)
# variable: max(600 + 150 + 50 + 100, the last step's 700 + 50) = 900; halved: 100 + 200 + 100 + 450 = 850 MiB
check(not ex2["estimate"] and not any(r["estimate"] for r in ex2["remedies"]) and ex2["remedies"][0]["peak_allocated"] == 850 * MiB
      and "not seen" not in "\n".join(ex2["lines"]) and "peak ~850.00 MiB" in "\n".join(ex2["lines"]),
      "a failure after a completed step: a prediction, not a bound: %s" % ex2["lines"][-2:])
# failing in a later, longer step's forward (half done): its own figures (600/0.5 + 150 + 50 + 100 =
# 1500) are above the last step's peak (750): halved 100 + 200 + 100 + 750 = 1150 MiB, a prediction
longer = dict(later, phase="forward", forward_progress=0.5)
ex3 = oom_explain.explain(longer)
check(ex3["remedies"][0]["peak_allocated"] == 1150 * MiB and not ex3["remedies"][0]["estimate"]
      and ex3["step_peak_allocated"] == 1900 * MiB,
      "a longer step failing in forward: %d MiB" % (ex3["remedies"][0]["peak_allocated"] // MiB))

# --- the categories record -------------------------------------------------------------------
def window(peak, tags_at_peak, own, now_alloc, reserved=None):
    v = [0] * cr.WINDOW_SIZE
    v[0], v[1], v[2], v[3], v[4], v[5] = peak, reserved or peak, reserved or peak, peak, now_alloc, reserved or peak
    for name, b in tags_at_peak.items():
        v[cr.FIXED + cr.TAG[name]] = b
    for name, b in own.items():
        v[cr.FIXED + cr.TAG_MAX + cr.TAG[name]] = b
    v[cr.FIXED + 2 * cr.TAG_MAX] = now_alloc
    return v


w1 = cr.window_record(window(1000, {"parameters": 400, "activations": 600}, {"activations": 600}, 500, 1500))
w2 = cr.window_record(window(1200, {"parameters": 400, "activations": 800}, {"activations": 800, "other": 50}, 500, 1400))
m = cr.merge(w1, w2)
check(m["peak_allocated"] == 1200 and m["at_peak_allocated"]["activations"] == 800 and m["peak_reserved"] == 1500
      and m["own_peak"] == {**m["own_peak"], "activations": 800, "other": 50}, "merge keeps each peak with its moment")
check(m["reserved_but_free"] == 500 and abs(m["fragmentation"] - 0.3333) < 1e-3, "fragmentation at the reserved peak")
rec = {"format": cr.FORMAT, "steps": [{"step": 1, "phases": {"forward": w1, "backward": w2},
                                       "end": cr.now_record(window(0, {}, {}, 500))}], "run": m, "notes": ["n"]}
check(not cr.check_sums(rec), "sums exact")
bad = json.loads(json.dumps(rec))
bad["steps"][0]["phases"]["forward"]["at_peak_allocated"]["other"] = 1
check(len(cr.check_sums(bad)) == 1, "a sum off by a byte is found")
table = cr.format_table(rec)
check("forward" in table and "backward" in table and "note: n" in table and "0.00" in table, table)
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "c.json")
    cr.write_json(rec, path)
    check(cr.load_json(path) == rec, "JSON round trip")
    with open(path, "w") as f:
        f.write("{}")
    try:
        cr.load_json(path)
        check(False, "a JSON that is not a record is refused")
    except ValueError as e:
        check("not a vram_torch categories" in str(e), str(e))

# --- fit's lenient rule ------------------------------------------------------------------------
check(fit._lenient_rule([(2, 1000), (4, 600)]) == (1000, 0), "a workspace shrinking with the batch: its largest")
check(fit._lenient_rule([(2, 1000), (4, 2001)]) == (0, 501), "odd bytes per sample: rounded up: %s"
      % (fit._lenient_rule([(2, 1000), (4, 2001)]),))
check(fit._lenient_rule([(2, 100), (4, 1000)]) == (0, 450), "a size growing faster than the batch: never below 0")
base, per = fit._lenient_rule([(2, 1000), (4, 2000), (8, 3000)])
check(all(base + per * b >= s for b, s in ((2, 1000), (4, 2000), (8, 3000))), "never below a size seen")

# --- elastic workspaces: cuDNN's, given up under the cap -----------------------------------------
def conv_model(workspace_freed_at_once=True):
    """A parameter of 64 MiB; per step an activation of 8 MiB a sample and a workspace of 32 MiB a
    sample, freed right after it is made (cuDNN's pattern), or after another allocation (a
    temporary: not a workspace)."""
    m, n = [("a", 0, 64 << 20, 0, 0)], 1
    for _ in range(2):
        m.append(("a", n, 0, 8 << 20, 0))
        if workspace_freed_at_once:
            m += [("a", n + 1, 0, 32 << 20, 0), ("f", n + 1)]
        else:
            m += [("a", n + 1, 0, 32 << 20, 0), ("a", n + 2, 4096, 0, 0), ("f", n + 1), ("f", n + 2)]
        m.append(("f", n))
        n += 3
    return m


GiB = 1 << 30
check(fit.workspaces(conv_model()) == {2, 6} and not fit.workspaces(conv_model(False)), "workspaces: freed by the next event")
b_plain, r_plain, _ = fit.search(conv_model(), GiB, VRAM, "cudasim", 1024, "expandable_segments:False")
b_el, r_el, n_el = fit.search(conv_model(), GiB, VRAM, "cudasim", 1024, "expandable_segments:False", elastic=True)
# with the workspace: 64 + 40 b MiB fits 1 GiB to b = 24; without it 64 + 8 b, to b = 120 (less some rounding)
check(20 <= b_plain <= 24 and r_plain["workspaces_dropped"] == 0, "the workspace counted: batch %d" % b_plain)
check(110 <= b_el <= 120 and r_el["workspaces_dropped"] >= 1 and r_el["peak_requested_bytes"] <= GiB,
      "elastic: the workspace given up under the cap: batch %d, %d dropped" % (b_el, r_el["workspaces_dropped"]))
b_tmp, r_tmp, _ = fit.search(conv_model(False), GiB, VRAM, "cudasim", 1024, "expandable_segments:False", elastic=True)
check(20 <= b_tmp <= b_plain and r_tmp["workspaces_dropped"] == 0, "a temporary held across another allocation is never "
      "given up: batch %d" % b_tmp)

# --- streams of different shapes, lined up by the allocations' sites (fit_align.py) ---------------
class Stream:
    """A stream being written: ev (load_trace's events), sites; a(size, site) allocates (its id
    returned), f(id) frees."""

    def __init__(self):
        self.ev, self.sites = [], []

    def a(self, size, site):
        self.ev.append(("a", len(self.sites), size, 0))
        self.sites.append(site)
        return len(self.sites) - 1

    def f(self, ident):
        self.ev.append(("f", ident))


def stream(batch, workspace):
    """events and sites of a program: a parameter, per step an activation, a workspace only where
    asked (a library's choice at that batch), a temporary; the parameter lives on."""
    s = Stream()
    p = s.a(1000, "param")
    for step in range(3):
        act = s.a(100 * batch, "act")
        if workspace:
            s.f(s.a(5000, "conv"))
        s.f(s.a(10 * batch + 7, "tmp"))
        s.f(act)
    return s.ev, s.sites, p


lo, lo_sites, _ = stream(2, workspace=False)
hi, hi_sites, _ = stream(4, workspace=True)
model = fit.learn({2: lo, 4: hi}, lenient=True, sites={2: lo_sites, 4: hi_sites})
text = fit.synthesize(model, 8)
sizes = [int(line.split()[2]) for line in text.splitlines() if line.startswith("a ")]
check(sizes == [1000] + [800, 5000, 87] * 3, "a workspace only batch 4 has is kept, as seen: %s" % sizes)
frees = [line for line in text.splitlines() if line.startswith("f ")]
check(len(frees) == 9, "every free kept: %d" % len(frees))
try:
    fit.learn({2: lo, 4: hi}, lenient=True)
    check(False, "without sites, streams of different shapes are refused")
except fit.FitError as e:
    check("differently" in str(e), str(e))
same, same_sites, _ = stream(4, workspace=False)
check(fit.learn({2: lo, 4: same}, lenient=True, sites={2: lo_sites, 4: same_sites})
      == fit.learn({2: lo, 4: same}, lenient=True), "streams of one shape: the sites change nothing")
far = [("a", k, 64, 0) for k in range(200)]
try:
    fit.learn({2: lo, 4: far}, lenient=True, sites={2: lo_sites, 4: ["x%d" % k for k in range(200)]})
    check(False, "streams with nothing in common are refused")
except fit.FitError as e:
    check("cannot be lined up" in str(e), str(e))

# a workspace only batch 4 has, just before a held allocation from the same (Python-less) site: the
# autograd engine's allocations have no Python stack, so only the lifetime tells them apart; paired
# with the held one, the workspace's size would be read as the held one's growth, and the held one
# kept twice (cuDNN's backward in ResNet-50, bench/results/2026-12-06-torchplan.md)
def engine_stream(batch, extra_workspace):
    s = Stream()
    s.a(10000, "param")
    for step in range(3):
        if extra_workspace:
            s.f(s.a(3000, ""))
        held = s.a(1000 * batch, "")  # an activation's gradient, say: outlived by the next allocation
        s.f(s.a(500 * batch + 64, ""))  # a workspace both batches have
        grad = s.a(700, "")
        s.f(held)
        s.f(grad)
    return s.ev, s.sites


(lo, lo_sites), (hi, hi_sites) = engine_stream(2, False), engine_stream(4, True)
text = fit.synthesize(fit.learn({2: lo, 4: hi}, lenient=True, sites={2: lo_sites, 4: hi_sites}), 100)
sizes = [int(line.split()[2]) for line in text.splitlines() if line.startswith("a ")]
check(sizes == [10000] + [3000, 100000, 50064, 700] * 3, "the extra workspace kept apart from the held allocation: %s"
      % sizes[:8])


def peak_live(text):
    live, cur, peak = {}, 0, 0
    for line in text.splitlines():
        p = line.split()
        if p and p[0] == "a":
            live[p[1]] = int(p[2])
            cur += live[p[1]]
            peak = max(peak, cur)
        elif p and p[0] == "f":
            cur -= live.pop(p[1])
    return peak


check(peak_live(text) == 10000 + 100000 + 50064, "peak live bytes at batch 100: %d" % peak_live(text))

# --- fit -- train.py {batch}, with a stand-in for the program's runs ------------------------------
CHILD = r'''
import json, sys
a = sys.argv[1:]
get = lambda k: a[a.index(k) + 1] if k in a else None
batch = int(a[a.index("--") + 4])
mode = a[a.index("--") + 2]
result = {"steps": 3, "oom": False, "error": None, "ended": False, "peak_allocated": 0, "peak_reserved": 0}
if mode == "broken":
    result.update(steps=0, error="RuntimeError: broken")
elif mode == "inference":
    result.update(steps=0, ended=True)
if get("--trace"):  # at batch 4 a library workspace that batch 2 does not have (a shifted stream)
    lines, sites, n = ["# memtrace v1"], [], 0
    for step in range(3):
        lines += ["a %d %d 0" % (n, 64 << 20), "a %d %d 0" % (n + 1, (8 << 20) * batch + 4096)]
        sites += ["w", "act"]
        if batch == 4:
            lines += ["a %d %d 0" % (n + 2, 1 << 20), "f %d" % (n + 2)]
            sites.append("conv")
        lines += ["f %d" % (n + 1), "f %d" % n]
        n += 3 if batch == 4 else 2
    open(get("--trace"), "w").write("\n".join(lines) + "\n")
    json.dump(sites, open(get("--trace") + ".sites", "w"))
cap = int(get("--capacity") or 0)
if cap:
    need = (64 << 20) + (8 << 20) * batch + 4096
    result["peak_reserved"] = need
    result["oom"] = need > cap
json.dump(result, open(get("--result"), "w"))
'''
with tempfile.TemporaryDirectory() as d:
    child = os.path.join(d, "child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    script = os.path.join(d, "train.py")
    open(script, "w").close()
    real = fit_run.child_command
    fit_run.child_command = lambda args, batch, *rest, **kw: [sys.executable, child] + real(args, batch, *rest, **kw)[4:]

    def run(argv):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            status = fit_run.main(argv)
        return status, out.getvalue(), err.getvalue()
    status, out, err = run(["--capacity", "1GiB", "--vram", VRAM, "--json", "--compare", "--", script, "ok", "--bs",
                            "{batch}"])
    r = json.loads(out.splitlines()[0]) if out.strip() else {}
    # 64 MiB + 8 MiB x batch fits 1 GiB up to batch 119 as live bytes; vram's caching keeps some less
    check(status == 0 and r.get("real_runs") == 3 and r.get("confirmed") and 100 <= r["batch"] <= 119,
          "fit finds the batch with 3 real runs and confirms it: %s %s" % (status, err[-300:]))
    check(r.get("predicted_peak_reserved", 0) <= 1 << 30 and [x["kind"] for x in r.get("runs", [])] ==
          ["record", "record", "confirm"], "two recordings and a confirming run: %s" % r.get("runs"))
    by = r.get("by_allocator", {})
    check(sorted(by) == ["expandable", "native", "vram"] and by["vram"]["batch"] == r["batch"]
          and all(90 <= x["batch"] <= 119 for x in by.values()), "--compare: every allocator's batch: %s" % by)
    keep = os.path.join(d, "kept")
    status, out, err = run(["--capacity", "1GiB", "--vram", VRAM, "--json", "--keep", keep, "--", script, "ok", "--bs",
                            "{batch}"])
    kept = sorted(os.listdir(keep)) if os.path.isdir(keep) else []
    check(status == 0 and {"b2.trace", "b4.trace", "b2.trace.sites"} <= set(kept)
          and json.loads(out.splitlines()[0])["batch"] == r.get("batch"), "--keep DIR keeps the runs' files: %s" % kept)
    for args, want, text in ((["--capacity", "1GiB", "--", script, "ok", "--bs", "8"], 2, "no {batch}"),
                             (["--capacity", "1GiB", "--", os.path.join(d, "nope.py"), "{batch}"], 2, "no such script"),
                             (["--capacity", "1GiB", script, "{batch}"], 2, "put the program after --"),
                             (["--capacity", "1GiB", "--batches", "4", "--", script, "ok", "--bs", "{batch}"], 2,
                              "two or three"),
                             (["--capacity", "lots", "--", script, "ok", "--bs", "{batch}"], 2, "not a size"),
                             (["--capacity", "1GiB", "--vram", VRAM, "--", script, "broken", "--bs", "{batch}"], 1,
                              "failed before its first optimizer step"),
                             (["--capacity", "1GiB", "--vram", VRAM, "--", script, "inference", "--bs", "{batch}"], 2,
                              "no optimizer step"),
                             (["--capacity", "32MiB", "--vram", VRAM, "--", script, "ok", "--bs", "{batch}"], 1,
                              "batch 1 does not fit")):
        status, out, err = run(args)
        check(status == want and text in err, "%s: status %d, %r" % (text, status, err.strip()[-200:]))
    fit_run.child_command = real
    check(not [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("vram_fit_") and
               os.path.getmtime(os.path.join(tempfile.gettempdir(), n)) > os.path.getmtime(child)],
          "the runs' files are removed")
# --- run --categories: bad input said before the program runs (no PyTorch needed to say it) -------
env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(HERE), "python"))
for args, text in ((["--categories", "--out", "/nonexistent/c.json", __file__], "no such folder"),
                   (["--leaks", "--out", HERE, __file__], "is a folder"),
                   (["--categories", os.path.join(HERE, "no_such_script.py")], "no such script")):
    p = subprocess.run([sys.executable, "-m", "vram_torch", "run"] + args, capture_output=True, text=True, env=env)
    check(p.returncode == 2 and text in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          "run %s: status 2, one line: %d %r" % (" ".join(args[:2]), p.returncode, p.stderr[-200:]))
sys.exit(done("test_vram_torch_plan_pure"))

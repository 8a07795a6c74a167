"""test_torch_step_plan_cpu.py — learned placement under the PyTorch plug-in (VRAM_STEP_PLAN=1,
src/torch/plan_route.cpp) without PyTorch or a GPU: libvram_torch.so loaded with ctypes over the
fake driver, driven as CUDAPluggableAllocator drives it, each case in its own process (the
plan is made when a device's allocator starts):
- the H100 recording of checkpointed GPT-2 training (bench/results/gpu-placement/traces)
  replayed through vram_torch_alloc / vram_torch_free: a plan begins and serves most large
  requests, every block frees, the arena goes back with empty_cache, and with events that
  complete at once peak reserved memory is what bench_step_plan's cudasim replay gives
  (1.030 × peak requested without the plan, 1.029 with it, under the GPU script's configuration
  chunk_size_mb:8,move_min_mb:64; 1.036 and 1.030 with chunk_divisor:0, before it was the default);
- record_stream on an arena block is taken (on the arena's allocator block) and retires the plan;
- two threads allocating and freeing at once through one plan;
- VRAM_STEP_PLAN=early (default configuration): the same recording at 1.023 x peak requested,
  as bench_step_plan --early replays it (1.057 without a plan);
- VRAM_STEP_PLAN=layers (default configuration): the H100 recording of Llama generation, whose
  prefill repeats a layer, at 1.049 x peak requested, as bench_step_plan --min-period 16
  --confirm 8 --may-raise-peak replays it (1.058 without a plan);
- VRAM_STEP_PLAN=auto (default configuration): the kind decided from the stream, placing as
  bench_step_plan --auto does: checkpointed GPT-2 as the early plan (1.023), Llama generation as
  layer plans from its third call (1.049; 1.058 without a plan);
- VRAM_STEP_PLAN=2: one message, no plan, allocations served all the same; and no plan without
  the variable (vram_torch_step_plan_stats then fails with a message).
Usage: test_torch_step_plan_cpu.py LIBVRAM_TORCH FAKE_LIBCUDA REPO_ROOT
"""
import ctypes
import gzip
import os
import subprocess
import sys
import threading

if os.environ.get("VRAM_TEST_SANITIZED") and not os.environ.get("VRAM_TEST_PRELOADED"):
    print("SKIP: the sanitizer build's library cannot be loaded into an uninstrumented python "
          "without the sanitizers' runtimes preloaded (tests/extra.cmake)")
    sys.exit(77)
lib_path, fake, root = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

TRACES = os.path.join(root, "bench", "results", "gpu-placement", "traces")
TRACE = os.path.join(TRACES, os.environ.get("PLAN_TRACE", "ckpt_gpt2") + ".trace.gz")  # the child's
FIELDS = ("requests", "served", "missed", "begun", "retired", "period", "planned", "arena", "floor", "arena_now",
          "arena_live")


def load():
    lib = ctypes.CDLL(lib_path)
    vp, c_int = ctypes.c_void_p, ctypes.c_int
    lib.vram_torch_alloc.restype, lib.vram_torch_alloc.argtypes = vp, [ctypes.c_ssize_t, c_int, vp]
    lib.vram_torch_free.restype, lib.vram_torch_free.argtypes = None, [vp, ctypes.c_ssize_t, c_int, vp]
    lib.vram_torch_stats_text.restype, lib.vram_torch_stats_text.argtypes = vp, [c_int]
    lib.vram_torch_string_free.argtypes = [vp]
    lib.vram_torch_last_error.restype = ctypes.c_char_p
    lib.vram_torch_record_stream.argtypes = [vp, c_int, vp]
    lib.vram_torch_step_plan_stats.argtypes = [c_int, ctypes.POINTER(ctypes.c_ulonglong)]
    return lib


def plan_stats(lib):
    out = (ctypes.c_ulonglong * 11)()
    if lib.vram_torch_step_plan_stats(0, out) != 0:
        return None
    return dict(zip(FIELDS, out))


def stats(lib):
    from pycheck import take_string
    text = take_string(lib, lib.vram_torch_stats_text(0))
    return {k: int(v) for k, _, v in (l.rpartition(" ") for l in text.splitlines())}


def child_replay():
    """Replays the trace through the plug-in; prints the figures as key=value lines."""
    lib = load()
    ptrs, sizes = {}, {}
    replay_until(lib, ptrs, sizes, lambda: False)
    print("null_pointers=%d" % sum(1 for p in ptrs.values() if not p))
    s = stats(lib)
    ps = plan_stats(lib) or {}
    print("peak_reserved=%d" % s["reserved_bytes.all.peak"])
    for k, v in ps.items():
        print("%s=%d" % (k, v))
    for i in list(ptrs):
        lib.vram_torch_free(ptrs.pop(i), sizes.pop(i), 0, None)
    print("allocated_after=%d" % stats(lib)["allocated_bytes.all.current"])
    lib.vram_torch_empty_cache(0)
    print("reserved_after_empty=%d" % stats(lib)["reserved_bytes.all.current"])
    ps = plan_stats(lib) or {}
    print("arena_after_empty=%d" % ps.get("arena_now", -1))


def replay_until(lib, ptrs, sizes, stop):
    """Replays the trace through the plug-in until stop() holds (or the trace ends)."""
    with gzip.open(TRACE, "rt") as f:
        for line in f:
            if line.startswith("a "):
                _, i, size, _ = line.split()
                ptrs[i], sizes[i] = lib.vram_torch_alloc(int(size), 0, None), int(size)
            elif line.startswith("f "):
                i = line.split()[1]
                lib.vram_torch_free(ptrs.pop(i), sizes.pop(i), 0, None)
            else:
                continue
            if stop():
                return True
    return False


def child_cases():
    """record_stream on an arena block, two threads, then the plan's counters."""
    lib = load()
    ptrs, sizes = {}, {}
    found = replay_until(lib, ptrs, sizes, lambda: (plan_stats(lib) or {}).get("arena_live", 0) > 0)
    before = plan_stats(lib)
    print("found=%d" % found)
    rc = -9
    for i in reversed(list(ptrs)):  # the newest blocks first: a plan serves the step now running
        if sizes[i] > (1 << 20):
            rc = lib.vram_torch_record_stream(ptrs[i], 0, ctypes.c_void_p(0x1234))
            if plan_stats(lib)["retired"] > before["retired"]:
                break
    after = plan_stats(lib)
    print("record_stream_rc=%d" % rc)
    print("retired_delta=%d" % (after["retired"] - before["retired"]))
    for i in list(ptrs):
        lib.vram_torch_free(ptrs.pop(i), sizes.pop(i), 0, None)
    errors = []
    mib = 1 << 20

    def worker():
        try:
            for _ in range(200):
                live = [(lib.vram_torch_alloc(s * mib, 0, None), s * mib) for s in (3, 7, 2, 11, 5)]
                for p, s in live:
                    lib.vram_torch_free(p, s, 0, None)
        except Exception as e:  # (a crash would end the process: the parent sees it)
            errors.append(e)
    ts = [threading.Thread(target=worker) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("thread_errors=%d" % len(errors))
    print("allocated_after=%d" % stats(lib)["allocated_bytes.all.current"])
    print("arena_now=%d" % plan_stats(lib)["arena_now"])


def child_plain():
    lib = load()
    p = lib.vram_torch_alloc(8 << 20, 0, None)
    print("served=%d" % (1 if p else 0))
    print("stats_rc=%d" % (0 if plan_stats(lib) else -1))
    print("error=%s" % lib.vram_torch_last_error().decode().replace("\n", " "))
    lib.vram_torch_free(p, 8 << 20, 0, None)


def run(mode, **env):
    e = dict(os.environ, VRAM_LIBCUDA=fake, FAKE_CUDA_MEMORY=str(80 << 30), FAKE_CUDA_DEVICES="1",
             VRAM_ALLOC_CONF="chunk_size_mb:8,move_min_mb:64")
    e.pop("VRAM_STEP_PLAN", None)
    e.pop("PLAN_TRACE", None)
    e.update(env)
    p = subprocess.run([sys.executable, __file__, lib_path, fake, root, mode], capture_output=True, text=True, env=e)
    return p, dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)


if len(sys.argv) > 4:
    {"replay": child_replay, "cases": child_cases, "plain": child_plain}[sys.argv[4]]()
    sys.exit(0)

# events complete at once (FAKE_CUDA_EVENT_LAG=0): the plug-in places as `bench_step_plan --device
# cudasim` does on the same trace with the same options (1.030 without the plan, 1.029 with it)
p, with_plan = run("replay", VRAM_STEP_PLAN="1", FAKE_CUDA_EVENT_LAG="0")
check(p.returncode == 0 and "peak_reserved" in with_plan, "replay with the plan: %s %s" % (p.stdout[-300:], p.stderr[-300:]))
q, without = run("replay", FAKE_CUDA_EVENT_LAG="0")
check(q.returncode == 0 and "peak_reserved" in without and "begun" not in without,
      "replay without: no plan: %s %s" % (q.stdout[-300:], q.stderr[-300:]))
if "begun" in with_plan and "peak_reserved" in without:
    served, requests = int(with_plan["served"]), int(with_plan["requests"])
    check(int(with_plan["begun"]) >= 1 and served > requests // 2,
          "a plan begins and serves most large requests: %s of %s" % (served, requests))
    peak = 6926311944  # the trace's peak of live bytes
    r_with, r_without = int(with_plan["peak_reserved"]) / peak, int(without["peak_reserved"]) / peak
    check("%.3f" % r_without == "1.030" and "%.3f" % r_with == "1.029",
          "the replay's figures through the plug-in: %.4f without the plan, %.4f with it" % (r_without, r_with))
    check(with_plan["null_pointers"] == "0", "every request served")
    check(with_plan["allocated_after"] == with_plan["arena_now"] != "0",
          "every block freed: what stays allocated is the active plan's arena: %s" % with_plan)
    check(with_plan["reserved_after_empty"] == "0" and with_plan["arena_after_empty"] == "0",
          "empty_cache retires the plan and gives its arena back: %s" % with_plan)
    print("peak reserved with the plan %s, without %s" % (with_plan["peak_reserved"], without["peak_reserved"]))

# VRAM_STEP_PLAN=early under the default configuration: the early plan begins in the second step
# and the plug-in places as `bench_step_plan --early` does (1.023; 1.057 without a plan)
p, early = run("replay", VRAM_STEP_PLAN="early", FAKE_CUDA_EVENT_LAG="0", VRAM_ALLOC_CONF="")
q, plain_default = run("replay", FAKE_CUDA_EVENT_LAG="0", VRAM_ALLOC_CONF="")
if check(p.returncode == 0 and "begun" in early and "peak_reserved" in plain_default,
         "replay with an early plan: %s %s" % (p.stdout[-300:], p.stderr[-300:])):
    peak = 6926311944
    r_early, r_plain = int(early["peak_reserved"]) / peak, int(plain_default["peak_reserved"]) / peak
    check("%.3f" % r_early == "1.023" and "%.3f" % r_plain == "1.057",
          "the early plan through the plug-in: %.4f (without a plan %.4f)" % (r_early, r_plain))
    check(early["null_pointers"] == "0" and int(early["served"]) > int(early["requests"]) * 9 // 10,
          "an early plan serves over 90%% of large requests: %s of %s" % (early["served"], early["requests"]))

# VRAM_STEP_PLAN=layers: Llama generation's prefill planned layer by layer, as `bench_step_plan
# --min-period 16 --confirm 8 --may-raise-peak` places the same trace (1.049; 1.058 without a plan)
p, layers = run("replay", VRAM_STEP_PLAN="layers", PLAN_TRACE="gen_llama", FAKE_CUDA_EVENT_LAG="0", VRAM_ALLOC_CONF="")
q, gen_plain = run("replay", PLAN_TRACE="gen_llama", FAKE_CUDA_EVENT_LAG="0", VRAM_ALLOC_CONF="")
if check(p.returncode == 0 and "begun" in layers and "peak_reserved" in gen_plain,
         "replay with layer plans: %s %s" % (p.stdout[-300:], p.stderr[-300:])):
    peak = 695950096  # the trace's peak of live bytes
    r_layers, r_plain = int(layers["peak_reserved"]) / peak, int(gen_plain["peak_reserved"]) / peak
    check("%.3f" % r_layers == "1.049" and "%.3f" % r_plain == "1.058",
          "layer plans through the plug-in: %.4f (without a plan %.4f)" % (r_layers, r_plain))
    check(layers["null_pointers"] == "0" and int(layers["begun"]) >= 4 and int(layers["period"]) < 64,
          "a plan of a layer (period under 64 requests) begins in every call: %s" % layers)

# VRAM_STEP_PLAN=auto: each recording gets the kind of plan that suits it, as `bench_step_plan
# --auto` places them (checkpointed GPT-2 1.023 from a whole step; Llama generation 1.049 from layers)
for trace, peak, want, kind in (("ckpt_gpt2", 6926311944, "1.023", "whole step"), ("gen_llama", 695950096, "1.049", "layer")):
    p, auto = run("replay", VRAM_STEP_PLAN="auto", PLAN_TRACE=trace, FAKE_CUDA_EVENT_LAG="0", VRAM_ALLOC_CONF="")
    if check(p.returncode == 0 and "begun" in auto, "replay of %s with auto plans: %s %s"
             % (trace, p.stdout[-300:], p.stderr[-300:])):
        r_auto = int(auto["peak_reserved"]) / peak
        check("%.3f" % r_auto == want, "auto plans on %s through the plug-in: %.4f (want %s)" % (trace, r_auto, want))
        period_ok = int(auto["period"]) >= 64 if kind == "whole step" else int(auto["period"]) < 64
        check(auto["null_pointers"] == "0" and int(auto["begun"]) >= 1 and period_ok,
              "%s: a %s's plan begins (period %s)" % (trace, kind, auto["period"]))

p, cases = run("cases", VRAM_STEP_PLAN="1")
check(p.returncode == 0, "cases run: %s %s" % (p.stdout[-300:], p.stderr[-300:]))
check(cases.get("found") == "1", "the replay reaches a plan with live arena blocks: %s" % cases)
check(cases.get("record_stream_rc") == "0" and cases.get("retired_delta") == "1",
      "record_stream on an arena block: taken, the plan retired: %s" % cases)
check(cases.get("thread_errors") == "0" and cases.get("allocated_after") == "0" and cases.get("arena_now") == "0",
      "two threads through one plan, the retired arena given back once drained: %s" % cases)

p, bad = run("plain", VRAM_STEP_PLAN="2")
check(p.returncode == 0 and bad.get("served") == "1" and bad.get("stats_rc") == "-1",
      "VRAM_STEP_PLAN=2: allocations served without a plan: %s" % bad)
check(p.stderr.count("VRAM_STEP_PLAN=2: 0, 1, early, layers or auto") == 1 and "no step plan on cuda:0" in p.stderr,
      "and one message says why: %r" % p.stderr)
p, plain = run("plain")
check(plain.get("stats_rc") == "-1" and "VRAM_STEP_PLAN=1 starts one" in plain.get("error", "") and p.stderr == "",
      "no variable, no plan, no message: %s %r" % (plain, p.stderr))
sys.exit(done("test_torch_step_plan_cpu"))

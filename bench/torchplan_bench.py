"""torchplan_bench.py — issue 39's measurements on a GPU: categories, the largest batch, OOM
remedies, leaks. bench/run_torchplan_gpu.sh runs every part; each writes JSON under --out.

    python bench/torchplan_bench.py categories --out DIR   the eight workloads behind traces/ under vram
        with the tracker: categories add up to allocated bytes at every step end and peak; parameters,
        gradients and optimizer state equal what gc finds in the models and optimizers (numel x
        element size of the distinct storages); leaks flagged (must be none)
    python bench/torchplan_bench.py fit --model M --capacity GIB --out DIR
        Lightning-style doubling + bisection and accelerate-style halving, by real runs in this
        process under PyTorch's allocator capped at the capacity (their trials, OOMs, batch; the
        bisection's bracket is the true largest batch), then `python -m vram_torch fit --allocator
        native` on the same program (batch, predicted and measured peak reserved, real runs)
    python bench/torchplan_bench.py oom --model M --capacity GIB --batch B --out DIR
        runs at batch B under vram capped at the capacity until it runs out of memory, takes
        explain_oom()'s predicted peak for the batch halved, then measures a run at B/2
    python bench/torchplan_bench.py cli --out DIR
        `python -m vram_torch run --categories --leaks` on torchplan_programs.py: the three planted
        leaks (flagged by step 3, the planted line in the stack), clean runs (none flagged), AMP,
        checkpointing and torch.compile (categories add up)
    python bench/torchplan_bench.py bad --out DIR
        `python -m vram_torch fit` on bad input (no {batch}, a script failing before its first step,
        a capacity too small for batch 1, a program with no optimizer step)
    python bench/torchplan_bench.py table DIR               the markdown table of everything in DIR
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, HERE)
GiB = 1 << 30
STEPS = 3


def storages_bytes(tensors):
    seen = {}
    for t in tensors:
        if t is not None and t.is_cuda:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def independent(torch):
    """Parameters, gradients and optimizer state as the live modules and optimizers hold them."""
    params, opts = [], []
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.nn.Parameter):
                params.append(o)
            elif isinstance(o, torch.optim.Optimizer):
                opts.append(o)
        except Exception:  # (a dead weak proxy, an object whose class check raises)
            continue
    state = [v for o in opts for s in o.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    return {"parameters": storages_bytes(params), "gradients": storages_bytes([p.grad for p in params]),
            "optimizer_state": storages_bytes(state)}


def categories(out):
    import torch_workloads
    import extra_workloads
    torch, vt = torch_workloads.setup_allocator("vram")
    from vram_torch import tracker as cat
    from vram_torch.leak_finder import LeakFinder
    from vram_torch import category_report as cr
    tracker = vt.track(leaks=True, program=["bench/torchplan_bench.py", "categories"])
    names = ["resnet50_train", "gpt2_train", "bert_varlen", "gpt2_generate"] + list(extra_workloads.WORKLOADS)
    rows = []
    for name in names:
        gc.collect()
        vt.empty_cache()
        tracker.leaks = LeakFinder()
        t0 = time.time()
        try:
            rows.append(one_workload(torch, vt, tracker, cr, torch_workloads, name))
        except Exception as e:  # (a model whose package is missing here): said in its row, the rest go on
            rows.append({"workload": name, "error": "%s: %s" % (type(e).__name__, str(e)[:300])})
        rows[-1]["seconds"] = round(time.time() - t0, 1)
        print(json.dumps({k: rows[-1].get(k) for k in ("workload", "steps", "sums_exact", "independent_equal",
                                                         "seconds", "error")} | {"leaks": len(rows[-1].get("leaks", []))}),
              flush=True)
        with open(os.path.join(out, "categories.json"), "w") as f:  # (each time: kept should a later one hang)
            json.dump(rows, f, indent=1)
        gc.collect()
    cat.stop()


def one_workload(torch, vt, tracker, cr, torch_workloads, name):
    """Three steps of a workload under the tracker: its row (sums, the independent check, leaks)."""
    first = len(tracker.steps)
    step = torch_workloads.build(name, torch)
    inference = name in ("gpt2_generate", "effnet_infer")
    checks, mismatch = [], []
    for i in range(3):
        step()
        if inference:
            vt.mark_step()
        torch.cuda.synchronize()
        st = vt.memory_stats()
        tags = {k: st.get("tags.%s.requested_bytes.current" % t, 0) for k, t in
                (("parameters", "parameter"), ("gradients", "gradient"), ("optimizer_state", "optimizer_state"))}
        ind = independent(torch)
        checks.append({"step": i + 1, "tags": tags, "independent": ind})
        if tags != ind:
            mismatch.append(i + 1)
    del step
    steps = tracker.record()["steps"][first:]
    bad = cr.check_sums({"steps": steps})
    run = None
    for s in steps:
        for w in s["phases"].values():
            run = cr.merge(run, w)
    return {"workload": name, "steps": len(steps), "sums_exact": not bad and sum(run["at_peak_allocated"].values())
            == run["peak_allocated"], "sum_errors": bad[:3], "independent_equal": not mismatch,
            "mismatch_steps": mismatch, "checks": checks[-1], "peak": run, "leaks": tracker.leaks.leaks()}


def program_cmd(model, batch, steps=STEPS, extra=()):
    return [sys.executable, os.path.join(HERE, "torchplan_programs.py"), "--model", model, "--batch-size", str(batch),
            "--steps", str(steps)] + list(extra)


def trials(model, capacity):
    """Lightning-style and accelerate-style searches by real runs in this process (PyTorch's allocator)."""
    import torch
    torch.cuda.set_per_process_memory_fraction(min(1.0, capacity / torch.cuda.mem_get_info()[1]))
    log = []  # (batch, ran, peak allocated, peak reserved, allocator retries, out-of-memory errors raised)

    def fits(b):
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_stats()
        ok = train_steps(torch, model, b) is None
        st = torch.cuda.memory_stats()
        # peaks and the allocator's reactions at the cap (cache released and retried), for the record
        log.append((b, ok, st.get("allocated_bytes.all.peak", 0), st.get("reserved_bytes.all.peak", 0),
                    st.get("num_alloc_retries", 0) - before.get("num_alloc_retries", 0),
                    st.get("num_ooms", 0) - before.get("num_ooms", 0)))  # (caught ones too: cuDNN's fallbacks)
        return ok

    # Lightning's BatchSizeFinder, mode "binsearch": doubling from 2 until a failure, then bisection
    start = len(log)
    lo, hi, b = 0, None, 2
    while b <= 4096:
        if fits(b):
            lo, b = b, 2 * b
        else:
            hi = b
            break
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    lightning = {"trials": len(log) - start, "ooms": sum(1 for x in log[start:] if not x[1]), "batch": lo}
    truth = lo if hi == lo + 1 else None  # the bracket: lo ran, lo+1 ran out of memory
    # accelerate's find_executable_batch_size: from 128, halved at each out-of-memory
    start, b = len(log), 128
    while b >= 1 and not fits(b):
        b //= 2
    accelerate = {"trials": len(log) - start, "ooms": sum(1 for x in log[start:] if not x[1]), "batch": b}
    return {"lightning": lightning, "accelerate": accelerate, "true_batch": truth, "log": log}


def fit(model, capacity_gib, out, elastic=False, batches=None):
    capacity = int(capacity_gib * GiB)
    r = {"model": model, "capacity": capacity}
    r.update(trials(model, capacity))
    path = os.path.join(out, "fit_%s.json" % model)
    with open(path, "w") as f:  # the baselines, kept should the fit below not finish
        json.dump(r, f, indent=1)
    r.update(fit_command(model, capacity, out, []))
    if elastic:  # again, cuDNN's workspaces given up under the cap (its own 3 real runs)
        r["elastic"] = fit_command(model, capacity, out, ["--elastic-workspaces"])
    if batches:  # again, recorded at other batches (cuDNN chooses its workspaces by shape)
        r["batches"] = fit_command(model, capacity, out, ["--batches", batches])
    print(json.dumps({k: v for k, v in r.items() if k not in ("log", "fit_stderr")}), flush=True)
    with open(path, "w") as f:
        json.dump(r, f, indent=1)


def fit_command(model, capacity, out, extra):
    """`python -m vram_torch fit --allocator native` on the program: fit_seconds, fit_status, fit
    (its JSON), fit_stderr."""
    r = {}
    t0 = time.time()
    keep = os.path.join(out, "fit_%s%s_files" % (model, "".join("_" + x.strip("-").replace(",", "_") for x in extra)))
    cmd = [sys.executable, "-m", "vram_torch", "fit", "--capacity", str(capacity), "--allocator", "native",
           "--steps", str(STEPS), "--compare", "--json", "--keep", keep] + extra
    cmd += ["--"] + program_cmd(model, "{batch}", 50)[1:]
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    r["fit_seconds"] = round(time.time() - t0, 1)
    r["fit_status"] = p.returncode
    line = [x for x in p.stdout.splitlines() if x.startswith("{")]
    r["fit"] = json.loads(line[-1]) if line else None
    r["fit_stderr"] = p.stderr[-1500:]
    return r


def train_steps(torch, model, batch, steps=STEPS):
    """Builds the model afresh and trains `steps` steps at `batch` with the program's own loop
    (torchplan_programs.train, as `python torchplan_programs.py --model M` runs it): the error
    message of an out-of-memory, or None; the model is gone afterwards."""
    import torchplan_programs as tp
    built = tp.build(model)
    message = None
    try:
        tp.train(*built, batch, steps, amp=model in ("gpt2", "llama"), say=lambda line: None)
    except torch.OutOfMemoryError as e:
        message = str(e)
    finally:
        built = None
        gc.collect()
        torch.cuda.empty_cache()
    return message


def oom(model, capacity_gib, batch, out):
    """Doubles the batch from `batch` until a run under vram at the capacity runs out of memory;
    explain_oom()'s halved batch (the last that ran) is then measured in a fresh process."""
    import torch
    import vram_torch as vt
    capacity = int(capacity_gib * GiB)
    vt.enable()
    vt.track()
    torch.cuda.set_per_process_memory_fraction(min(1.0, capacity / torch.cuda.mem_get_info()[1]))
    message, tries = None, []
    while message is None and len(tries) < 4:
        message = train_steps(torch, model, batch)
        tries.append(batch)
        if message is None:
            batch *= 2
    r = {"model": model, "capacity": capacity, "batch": batch, "tries": tries, "oom": message is not None}
    if message is not None:
        ex = vt.explain_oom()
        r["message_has_categories"] = "vram categories at the failure" in message
        r["explain"] = ex["lines"]
        half = ex["remedies"][0]
        r["predicted_peak_allocated"] = half["peak_allocated"]
        r["predicted_peak_reserved"] = half["peak_reserved"]
        r["estimate"] = half.get("estimate", False)  # no step completed: the step estimated from its forward
        r["forward_progress"] = ex["at_failure"].get("forward_progress")
        res = os.path.join(out, "oom_half_%s.json" % model)
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        subprocess.run([sys.executable, "-m", "vram_torch", "_fit_child", "--steps", str(STEPS), "--result", res,
                        "--allocator", "vram", "--capacity", str(capacity), "--"]
                       + program_cmd(model, batch // 2, 50)[1:], env=env)
        with open(res) as f:
            m = json.load(f)
        r["measured"] = m
        if m.get("peak_allocated"):
            r["error_allocated"] = round(half["peak_allocated"] / m["peak_allocated"] - 1, 4)
            r["error_reserved"] = round(half["peak_reserved"] / m["peak_reserved"] - 1, 4)
    print(json.dumps(r), flush=True)
    with open(os.path.join(out, "oom_%s.json" % model), "w") as f:
        json.dump(r, f, indent=1)


def leak_lines(kind):
    """The lines of torchplan_programs.py marked as allocating the memory of leak `kind`."""
    with open(os.path.join(HERE, "torchplan_programs.py")) as f:
        return {i for i, line in enumerate(f, 1) if "LEAK_LINE" in line and kind in line.split("LEAK_LINE")[1]}


def cli(out):
    """`python -m vram_torch run --categories --leaks` on the planted leaks, a clean run, and the
    variants (AMP, checkpointing, torch.compile): leaks found and where, sums exact."""
    from vram_torch import category_report as cr
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    runs = [("mlp_clean", "mlp", []), ("mlp_sum_loss", "mlp", ["--leak", "sum_loss"]),
            ("mlp_list", "mlp", ["--leak", "list"]), ("mlp_hook", "mlp", ["--leak", "hook"]),
            ("gpt2_list", "gpt2", ["--leak", "list"]), ("mlp_amp", "mlp", ["--amp"]),
            ("mlp_checkpoint", "mlp", ["--checkpoint"]), ("gpt2_checkpoint", "gpt2", ["--checkpoint"]),
            ("mlp_compile", "mlp", ["--compile"])]
    rows = []
    for name, model, extra in runs:
        path = os.path.join(out, "run_%s.json" % name)
        t0 = time.time()
        p = subprocess.run([sys.executable, "-m", "vram_torch", "run", "--categories", "--leaks", "--out", path, "--"]
                           + program_cmd(model, 16 if model == "gpt2" else 256, 4, extra)[1:],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        row = {"name": name, "status": p.returncode, "seconds": round(time.time() - t0, 1), "count": 0,
               "first_step": "-", "where": "-", "line_ok": "-"}
        if os.path.exists(path):
            rec = cr.load_json(path)
            leaks = rec.get("leaks", [])
            row.update(count=len(leaks), sums_exact=not cr.check_sums(rec), steps=len(rec["steps"]))
            row["activations_peak"] = max((w["own_peak"].get("activations", 0) for s in rec["steps"]
                                           for w in s["phases"].values()), default=0)
            if leaks:
                row["first_step"] = min(g["first_step"] for g in leaks)
                row["where"] = leaks[0]["where"] + " (%s)" % leaks[0]["category"]
            kind = [x for x in extra if x in ("sum_loss", "list", "hook")]
            if kind:
                want = leak_lines(kind[0])
                row["line_ok"] = any(os.path.basename(f[0]) == "torchplan_programs.py" and f[1] in want
                                     for g in leaks for f in g["stack"])
        else:
            row["stderr"] = p.stderr[-1500:]
        print(json.dumps(row), flush=True)
        rows.append(row)
    with open(os.path.join(out, "leaks.json"), "w") as f:
        json.dump(rows, f, indent=1)


BROKEN = "import torch\nraise RuntimeError('broken before the first step')\n"
INFERENCE = ("import sys, torch\nm = torch.nn.Linear(64, 64).cuda()\nwith torch.no_grad():\n"
             "    for _ in range(3):\n        m(torch.randn(int(sys.argv[2]), 64, device='cuda'))\n")


def bad_inputs(out):
    """`python -m vram_torch fit` on bad input: each a clear message and a status other than 0."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    rows = []
    for name, text in (("broken.py", BROKEN), ("inference.py", INFERENCE)):
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    prog = program_cmd("mlp", "{batch}", 50)[1:]
    cases = [("no {batch} placeholder", ["--capacity", "8GiB", "--"] + program_cmd("mlp", 4, 50)[1:], 2),
             ("fails before its first step", ["--capacity", "8GiB", "--", os.path.join(out, "broken.py"), "{batch}"], 1),
             ("capacity too small for batch 1", ["--capacity", "4MiB", "--"] + prog, 1),
             ("no optimizer step (inference)", ["--capacity", "8GiB", "--", os.path.join(out, "inference.py"), "--b",
                                                "{batch}"], 2)]
    for what, args, want in cases:
        p = subprocess.run([sys.executable, "-m", "vram_torch", "fit"] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env, timeout=120)
        msg = (p.stderr.strip().splitlines() or [""])[0][:200]
        rows.append({"case": what, "status": p.returncode, "want": want, "ok": p.returncode == want, "message": msg})
        print(json.dumps(rows[-1]), flush=True)
    with open(os.path.join(out, "bad_input.json"), "w") as f:
        json.dump(rows, f, indent=1)


def json_rows(folder, name, title, head, cells):
    """A markdown section: a row of cells(r) for each r of the JSON list in folder/name ([] when
    the file is missing)."""
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return []
    out = ["### " + title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in json.load(open(path)):
        out.append("| " + " | ".join(str(c) for c in cells(r)) + " |")
    return out + [""]


def pred_over_measured(ft):
    if ft.get("measured_peak_reserved") and ft.get("predicted_peak_reserved"):
        return "%.3f" % (ft["predicted_peak_reserved"] / ft["measured_peak_reserved"])
    return "-"


def grid_table(folder):
    """The GPU runtime's grid (bench/plan_grid.py --device cuda --json): planned against measured."""
    path = os.path.join(folder, "plan_grid_gpu.json")
    if not os.path.exists(path):
        return []
    rec = json.load(open(path))
    out = ["### vram plan --device cuda against vram train --device cuda:0 (%d steps)" % rec["steps"], "",
           "| flags | measured alloc MiB | planned | measured reserved MiB | planned | error |", "|---|---|---|---|---|---|"]
    for r in rec["rows"]:
        if "error" not in r:
            out.append("| `%s` | failed: %s | | | | |" % (r["flags"], r.get("failed", "").strip().replace("|", "/")[-150:]))
            continue
        out.append("| `%s` | %.2f | %.2f | %.2f | %.2f | %+.2f%% |" % (
            r["flags"], r["measured_allocated"], r["planned_allocated"], r["measured_reserved"], r["planned_reserved"],
            100 * r["error"]))
    errs = [r["error"] for r in rec["rows"] if "error" in r]
    if errs:
        out += ["", "%d of %d measured; reserved error %+.2f%% .. %+.2f%%; within the bounds (+3%%, -2%%): %d" % (
            len(errs), len(rec["rows"]), 100 * min(errs), 100 * max(errs), sum(1 for e in errs if -0.02 <= e <= 0.03))]
    for r in rec.get("remedies", []):
        out.append("- remedy %s `%s`: planned %.2f MiB, %s" % (r["remedy"], r["flags"], r["predicted"], (
            "measured %.2f MiB (%+.2f%%)" % (r["measured"], 100 * r["error"])) if "measured" in r else
            "fits: %s%s" % (r["fits"], " (%s)" % r["failed"][-200:] if "failed" in r else "")))
    return out + [""]


def table(folder):
    lines = []
    path = os.path.join(folder, "categories.json")
    if os.path.exists(path):
        lines += ["### Categories (8 workloads under vram, 3 steps)", "",
                  "| workload | steps | sums exact | params/grads/optim = gc | peak alloc MiB | activ | temps | leaks | s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in json.load(open(path)):
            if "error" in r:
                lines.append("| %s | error: %s | | | | | | | |" % (r["workload"], r["error"].replace("|", "/")))
                continue
            p = r["peak"]
            lines.append("| %s | %d | %s | %s | %.0f | %.0f | %.0f | %d | %.0f |" % (
                r["workload"], r["steps"], r["sums_exact"], r["independent_equal"], p["peak_allocated"] / 2 ** 20,
                p["at_peak_allocated"].get("activations", 0) / 2 ** 20,
                p["at_peak_allocated"].get("temporaries", 0) / 2 ** 20, len(r["leaks"]), r["seconds"]))
        lines.append("")
    fits = sorted(f for f in os.listdir(folder) if f.startswith("fit_") and f.endswith(".json"))
    if fits:
        lines += ["### Largest batch (PyTorch native allocator, capped)", "",
                  "| model | GiB | true | fit batch | fit runs | fit OOMs | pred/meas reserved | Lightning batch/trials/OOMs"
                  " | accelerate batch/trials/OOMs | replayed batch vram / expandable | elastic workspaces: batch, pred/meas,"
                  " dropped | other recording batches: batch, pred/meas |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for f in fits:
            r = json.load(open(os.path.join(folder, f)))
            ft = r.get("fit") or {}
            ratio = pred_over_measured(ft)
            el = (r.get("elastic") or {}).get("fit") or {}
            elastic = "%s, %s, %s" % (el.get("batch", "-"), pred_over_measured(el), el.get("workspaces_dropped", "-"))
            ob = (r.get("batches") or {}).get("fit") or {}
            other = "%s (%s), %s" % (ob.get("batch", "-"), ",".join(str(x["batch"]) for x in ob.get("runs", [])
                                                                   if x["kind"] == "record"), pred_over_measured(ob))
            fit_ooms = sum(1 for x in ft.get("runs", []) if x.get("oom"))
            by = ft.get("by_allocator", {})
            lines.append("| %s | %.1f | %s | %s | %s | %d | %s | %d / %d / %d | %d / %d / %d | %s / %s | %s | %s |" % (
                r["model"], r["capacity"] / GiB, r["true_batch"], ft.get("batch", "fail (status %s)" % r.get("fit_status")),
                ft.get("real_runs", "-"), fit_ooms, ratio, r["lightning"]["batch"], r["lightning"]["trials"],
                r["lightning"]["ooms"], r["accelerate"]["batch"], r["accelerate"]["trials"], r["accelerate"]["ooms"],
                by.get("vram", {}).get("batch", "-"), by.get("expandable", {}).get("batch", "-"),
                elastic if r.get("elastic") else "-", other if r.get("batches") else "-"))
        lines.append("")
    ooms = sorted(f for f in os.listdir(folder) if f.startswith("oom_") and f.endswith(".json")
                  and not f.startswith("oom_half"))
    if ooms:
        lines += ["### OOM remedy: batch halved (vram, capped)", "",
                  "| model | GiB | batch | failed in | predicted alloc MiB | measured MiB | error | error reserved |"
                  " estimated (no step completed) | message has categories |", "|---|---|---|---|---|---|---|---|---|---|"]
        for f in ooms:
            r = json.load(open(os.path.join(folder, f)))
            if r.get("oom") and r.get("measured"):
                lines.append("| %s | %.0f | %d -> %d | %s | %.0f | %.0f | %+.1f%% | %+.1f%% | %s | %s |" % (
                    r["model"], r["capacity"] / GiB, r["batch"], r["batch"] // 2,
                    (r.get("explain") or ["?"])[0].split(" in ")[-1].split(",")[0],
                    r["predicted_peak_allocated"] / 2 ** 20, (r["measured"].get("peak_allocated") or 0) / 2 ** 20,
                    100 * r.get("error_allocated", 0), 100 * r.get("error_reserved", 0), r.get("estimate", "-"),
                    r.get("message_has_categories")))
        lines.append("")
    lines += grid_table(folder)
    lines += json_rows(folder, "leaks.json", "run --categories --leaks (4 steps)",
                       ["program", "status", "sums exact", "leaks", "first step", "where", "planted line in stack"],
                       lambda r: [r["name"], r["status"], r.get("sums_exact", "-"), r["count"], r["first_step"],
                                  r["where"], r["line_ok"]])
    lines += json_rows(folder, "bad_input.json", "fit on bad input", ["case", "status (wanted)", "message"],
                       lambda r: [r["case"], "%d (%d)" % (r["status"], r["want"]), r["message"].replace("|", "/")])
    print("\n".join(lines))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["categories", "fit", "oom", "cli", "bad", "table"])
    p.add_argument("folder", nargs="?")
    p.add_argument("--out", default=".")
    p.add_argument("--model", default="gpt2")
    p.add_argument("--capacity", type=float, default=8.0, help="GiB")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--elastic", action="store_true", help="fit: also with --elastic-workspaces")
    p.add_argument("--batches", help="fit: also recorded at these batches (e.g. 8,16)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.what == "categories":
        categories(a.out)
    elif a.what == "fit":
        fit(a.model, a.capacity, a.out, a.elastic, a.batches)
    elif a.what == "oom":
        oom(a.model, a.capacity, a.batch, a.out)
    elif a.what == "cli":
        cli(a.out)
    elif a.what == "bad":
        bad_inputs(a.out)
    else:
        table(a.folder or a.out)


if __name__ == "__main__":
    main()

"""infer_torch.py — PyTorch's side of bench/run_infer_gpu.sh: a GPT-2 124M with random weights
(Hugging Face transformers), saved as safetensors for vram to load; the same prompts through
PyTorch; and the side-by-side report of vram's logs against PyTorch's numbers.

    python3 bench/infer_torch.py make DIR
        GPT2LMHeadModel(GPT2Config()) with seed 0 (12 layers, 12 heads, width 768, vocab 50257,
        context 1024), saved by save_pretrained to DIR (model.safetensors), and DIR/prompts.json:
        8 prompts of 32 random token ids (seed 1), with DIR/prompts_bB.args for vram's flags.
    python3 bench/infer_torch.py run DIR --dtype f32|bf16 --batches 1,8 --tokens N --rounds R [--compile]
        The first prompt's logits (all positions) to DIR/torch_logits_<dtype>.bin (f32, [32, vocab]);
        then R rounds of: for each batch B, greedy generation of N tokens after the first B prompts
        with the KV cache (the model's past_key_values), timed (CUDA synchronised before and after),
        memory from the caching allocator: DIR/torch_<dtype>_b<B>[_compile]_r<R>.json. TF32 off
        (vram's f32 products do not use it either). --compile: torch.compile(model.forward), the
        first round's compiling run untimed.
    python3 bench/infer_torch.py report DIR
        Reads DIR/vram_<fmt>_b<B>_r<R>.log and the torch JSON files; prints logits agreement,
        greedy-token agreement and the speed and memory table (medians over rounds), last.
"""
import glob
import json
import os
import random
import re
import statistics
import sys
import time

P, ROWS = 32, 8


def cmd_make(d):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    model.save_pretrained(d)
    path = os.path.join(d, "model.safetensors")
    if not os.path.exists(path):  # an older default (pytorch_model.bin): write safetensors directly
        from safetensors.torch import save_model
        save_model(model, path, metadata={"format": "pt"})
    rng = random.Random(1)
    vocab = model.config.vocab_size
    prompts = [[rng.randrange(vocab) for _ in range(P)] for _ in range(ROWS)]
    with open(os.path.join(d, "prompts.json"), "w") as f:
        json.dump({"prompts": prompts, "params": sum(p.numel() for p in model.parameters())}, f)
    for b in (1, ROWS):
        with open(os.path.join(d, "prompts_b%d.args" % b), "w") as f:
            for row in prompts[:b]:
                f.write("--prompt-ids\n%s\n" % ",".join(map(str, row)))
    print("made %s: %d parameters, %.1f MiB file" % (path, sum(p.numel() for p in model.parameters()),
                                                     os.path.getsize(path) / 2**20))


def greedy(model, ids, n):
    """n greedy tokens after ids [B, P] with the KV cache; (tokens [B, n], prefill s, decode s)."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values
    nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
    toks = [nxt]
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    for _ in range(n - 1):
        out = model(input_ids=nxt, past_key_values=past, use_cache=True)
        past = out.past_key_values
        nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
        toks.append(nxt)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return torch.cat(toks, 1), t1 - t0, t2 - t1


def cmd_run(d, dtype, batches, tokens, compile_, rounds):
    import torch
    from transformers import GPT2LMHeadModel

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    prompts = json.load(open(os.path.join(d, "prompts.json")))["prompts"]
    model = GPT2LMHeadModel.from_pretrained(d).eval()
    model = model.to("cuda", dtype=torch.bfloat16 if dtype == "bf16" else torch.float32)
    torch.cuda.synchronize()
    weights = torch.cuda.memory_allocated()
    if compile_:
        model.forward = torch.compile(model.forward, dynamic=True)
    with torch.no_grad():
        if not compile_:
            lg = model(input_ids=torch.tensor(prompts[:1], device="cuda")).logits[0].float().contiguous().cpu()
            try:
                data = lg.numpy().tobytes()
            except Exception:  # no numpy: the bytes through torch alone
                data = bytes(lg.view(torch.uint8).flatten().tolist())
            with open(os.path.join(d, "torch_logits_%s.bin" % dtype), "wb") as f:
                f.write(data)
        for rnd in range(1, rounds + 1):
            for batch in batches:
                ids = torch.tensor(prompts[:batch], device="cuda")
                res = {"dtype": dtype, "batch": batch, "tokens": tokens, "compile": compile_, "round": rnd,
                       "weights_bytes": weights, "torch": torch.__version__,
                       "attn": getattr(model.config, "_attn_implementation", "?")}
                if compile_ and rnd == 1:  # compiles for the prompt's and the step's shapes, not timed
                    t = time.perf_counter()
                    greedy(model, ids, tokens)
                    res["compile_s"] = time.perf_counter() - t
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                toks, pre, dec = greedy(model, ids, tokens)
                res["peak_bytes"] = torch.cuda.max_memory_allocated()
                res["peak_over_weights_bytes"] = res["peak_bytes"] - base
                cfg = model.config
                el = 2 if dtype == "bf16" else 4
                res["kv_bytes"] = 2 * cfg.n_layer * batch * (P + tokens) * cfg.n_embd * el
                res["prefill_s"], res["decode_s"] = pre, dec
                res["decode_tok_s"] = batch * (tokens - 1) / dec
                res["ids"] = toks.cpu().tolist()
                name = "torch_%s_b%d%s_r%d.json" % (dtype, batch, "_compile" if compile_ else "", rnd)
                json.dump(res, open(os.path.join(d, name), "w"))
                print("torch %s batch %d%s round %d: decode %.1f tokens/s, prefill %.1f ms, weights %.1f MiB, peak %.1f MiB"
                      % (dtype, batch, " compiled" if compile_ else "", rnd, res["decode_tok_s"], pre * 1e3,
                         weights / 2**20, res["peak_bytes"] / 2**20), flush=True)


def parse_vram(path):
    t = open(path, errors="replace").read()
    r = {"ok": "tokens/s" in t}
    m = re.search(r"decode: (\d+) tokens in ([0-9.]+) ms = ([0-9.]+) tokens/s", t)
    if m:
        r["decode_tok_s"] = float(m.group(3))
    m = re.search(r"prefill: (\d+) prompt tokens in ([0-9.]+) ms", t)
    if m:
        r["prefill_ms"] = float(m.group(2))
    for key, label in (("weights", "weights"), ("kv", "kv cache"), ("temp", "temporaries"), ("other", "other"),
                       ("alloc", "allocator")):
        m = re.search(r"^  %s +([0-9.]+) MiB +([0-9.]+) MiB" % label, t, re.M)
        if m:
            r[key + "_cur"], r[key + "_peak"] = float(m.group(1)), float(m.group(2))
    r["ids"] = [list(map(int, m.group(1).split())) for m in re.finditer(r"^ids \d+: (.*)$", t, re.M)]
    return r


def read_f32(path):
    import torch
    return torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.float32)


def prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, f="%.1f"):
    return f % x if x is not None else "n/a"


def cmd_report(d):
    lines = []
    out = lines.append
    fmts = ["f32", "bf16", "q8_0", "q8_r"]
    # logits of the first prompt against PyTorch f32
    try:
        ref = read_f32(os.path.join(d, "torch_logits_f32.bin"))
        out("Logits of prompt 1 (32 positions x 50257) against PyTorch f32 (TF32 off):")
        for f in fmts + ["torch-bf16"]:
            p = os.path.join(d, "torch_logits_bf16.bin" if f == "torch-bf16" else "vram_logits_%s.bin" % f)
            if not os.path.exists(p):
                out("  %-10s no logits file" % f)
                continue
            x = read_f32(p)
            if x.numel() != ref.numel():
                out("  %-10s %d values, PyTorch has %d" % (f, x.numel(), ref.numel()))
                continue
            diff = (x - ref).abs()
            rel = float((x - ref).norm() / ref.norm())
            am = int((x.view(P, -1).argmax(1) == ref.view(P, -1).argmax(1)).sum())
            out("  %-10s max |diff| %.3g, relative error %.3g, argmax agrees at %d/%d positions"
                % ("vram " + f if f != "torch-bf16" else f, float(diff.max()), rel, am, P))
    except (OSError, ImportError) as e:
        out("Logits: not compared (%s)" % e)
    # greedy tokens against PyTorch f32 (and bf16) of the same batch, round 1
    out("")
    out("Greedy tokens (every row): tokens equal to PyTorch's before the first difference, of those generated:")
    for b in (1, ROWS):
        tj = {}
        for dt in ("f32", "bf16"):
            p = os.path.join(d, "torch_%s_b%d_r1.json" % (dt, b))
            if os.path.exists(p):
                tj[dt] = json.load(open(p))["ids"]
        for f in fmts:
            p = os.path.join(d, "vram_%s_b%d_r1.log" % (f, b))
            if not os.path.exists(p):
                continue
            v = parse_vram(p)["ids"]
            parts = []
            for dt, ids in tj.items():
                if len(ids) != len(v):
                    parts.append("vs torch %s: %d rows, vram printed %d" % (dt, len(ids), len(v)))
                    continue
                pre = [prefix(a, c) for a, c in zip(v, ids)]
                parts.append("vs torch %s: %s of %d" % (dt, " ".join(map(str, pre)), len(ids[0]) if ids else 0))
            out("  batch %d vram %-5s %s" % (b, f, "; ".join(parts) if parts else "no torch run"))
    # speed and memory
    rows = []
    for b in (1, ROWS):
        for f in fmts:
            rs = [parse_vram(p) for p in sorted(glob.glob(os.path.join(d, "vram_%s_b%d_r*.log" % (f, b))))]
            rs = [r for r in rs if r["ok"]]
            if not rs:
                rows.append(("vram " + f, b, None, None, None, None, None, None, 0))
                continue
            last = rs[-1]
            rows.append(("vram " + f, b, med([r.get("decode_tok_s") for r in rs]), med([r.get("prefill_ms") for r in rs]),
                         last.get("weights_cur"), last.get("kv_peak"), last.get("temp_peak"), last.get("alloc_peak"), len(rs)))
        for dt in ("f32", "bf16"):
            for c in ("", "_compile"):
                js = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, "torch_%s_b%d%s_r*.json" % (dt, b, c))))]
                if not js:
                    if c:
                        continue
                    rows.append(("torch " + dt, b, None, None, None, None, None, None, 0))
                    continue
                mib = lambda x: x / 2**20  # noqa: E731
                rows.append(("torch " + dt + (" compile" if c else " eager"), b, med([j["decode_tok_s"] for j in js]),
                             med([j["prefill_s"] * 1e3 for j in js]), mib(js[-1]["weights_bytes"]), mib(js[-1]["kv_bytes"]),
                             mib(js[-1]["peak_over_weights_bytes"]), mib(js[-1]["peak_bytes"]), len(js)))
    out("")
    out("Decode speed and memory, GPT-2 124M (random weights), prompts of %d tokens, greedy; medians over runs:" % P)
    out("  vram: weights = the allocator's parameter tag (the tied head held once, as PyTorch's); kv = kv_cache")
    out("  tag peak; temp = temporaries peak; total = allocator peak.")
    out("  torch: weights = memory_allocated after loading; kv = 2 x layers x batch x (prompt+tokens) x width x")
    out("  element size (computed); temp = peak during generation over what was allocated before; total = peak.")
    out("| runtime | batch | decode tok/s | prefill ms | weights MiB | kv MiB | temp MiB | total peak MiB | runs |")
    out("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        out("| %s | %d | %s | %s | %s | %s | %s | %s | %d |" % (r[0], r[1], fmt(r[2]), fmt(r[3], "%.2f"), fmt(r[4]),
                                                          fmt(r[5], "%.2f"), fmt(r[6], "%.2f"), fmt(r[7]), r[8]))
    text = "\n".join(lines)
    open(os.path.join(d, "report.txt"), "w").write(text + "\n")
    print(text)


def main():
    a = sys.argv[1:]
    if len(a) >= 2 and a[0] == "make":
        cmd_make(a[1])
    elif len(a) >= 2 and a[0] == "run":
        opt = {"--dtype": "f32", "--batches": "1", "--tokens": "64", "--rounds": "1"}
        i, comp = 2, False
        while i < len(a):
            if a[i] == "--compile":
                comp, i = True, i + 1
            elif a[i] in opt and i + 1 < len(a):
                opt[a[i]], i = a[i + 1], i + 2
            else:
                sys.exit("unknown argument %r" % a[i])
        cmd_run(a[1], opt["--dtype"], [int(b) for b in opt["--batches"].split(",")], int(opt["--tokens"]), comp,
                int(opt["--rounds"]))
    elif len(a) >= 2 and a[0] == "report":
        cmd_report(a[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

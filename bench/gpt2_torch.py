#!/usr/bin/env python3
"""gpt2_torch.py — PyTorch beside the runtime's GPT-2 on the GPU.

  check DIR   repeats the run that bench_gpt2_reference wrote into DIR (same initial weights,
              same batches, AdamW, clipping) with a PyTorch model of the same layout, fp32 with
              TF32 off, and compares: every step's loss within 1e-4 relative, every parameter's
              gradient after step 1 within 1e-3 relative norm. Exit status 1 on a mismatch.
              With --precision bf16|fp16 both sides train with mixed precision (PyTorch under
              autocast, fp16 with GradScaler) and the bounds are PyTorch's own spread: the same
              run repeated with another attention kernel (flash, then memory-efficient SDPA).
  speed       PyTorch GPT-2 124M training, B=8, T=1024, fused AdamW, fp32 (TF32 off) or
              --precision bf16 (autocast): --models from hf (HuggingFace's GPT2LMHeadModel, the
              anchor of BENCHMARKS.md), hf-ckpt (its gradient checkpointing), hf-compile (it under
              torch.compile), same (the
              same-layout model), same-compile (it under torch.compile); median step time,
              tokens/s, peak allocated and reserved.

The same-layout model: token + position embeddings, pre-norm blocks with c_attn [3C, C] and
GPT-2's tanh GELU (vram train's gpt2 default; --activation gelu_erf: PyTorch's nn.GELU(); check takes
DIR's activation.txt, erf where a DIR has none), final layer norm, output projection tied to the token embedding.
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True


class Block(nn.Module):
    def __init__(self, C, H, approximate):
        super().__init__()
        self.H, self.approximate = H, approximate
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn, self.attn.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.mlp = nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.attn.c_attn(self.ln_1(x)).view(B, T, 3, self.H, C // self.H).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        x = x + self.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate=self.approximate))


class GPT(nn.Module):
    def __init__(self, L, H, C, V, T, activation="gelu_erf"):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        approximate = "tanh" if activation == "gelu_tanh" else "none"
        self.h = nn.ModuleList(Block(C, H, approximate) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def rel(a, b):
    return (torch.linalg.vector_norm((a - b).double()) / torch.linalg.vector_norm(b.double()).clamp_min(1e-30)).item()


def autocast(args):
    if args.precision == "fp32":
        return torch.autocast("cuda", enabled=False)
    return torch.autocast("cuda", dtype=torch.bfloat16 if args.precision == "bf16" else torch.float16)


def dir_activation(d):
    """The GELU bench_gpt2_reference trained with (erf where DIR predates activation.txt)."""
    path = os.path.join(d, "activation.txt")
    return open(path).read().strip() if os.path.exists(path) else "gelu_erf"


def model_from(names, shapes, init, heads, activation):
    """The same-layout model on the GPU with the parameters of init.bin; returns it and its
    parameters by name."""
    L = 1 + max(int(n.split(".")[1]) for n in names if n.startswith("h."))
    V, C = shapes[names.index("wte.weight")]
    T = shapes[names.index("wpe.weight")][0]
    model = GPT(L, heads, C, V, T, activation).to("cuda")
    params = dict(model.named_parameters())
    at = 0
    with torch.no_grad():
        for n, sh in zip(names, shapes):
            k = math.prod(sh)
            params[n].copy_(torch.from_numpy(init[at:at + k].reshape(sh)))
            at += k
    assert at == init.size and len(params) == len(names), "parameter layout differs"
    return model, params


def train_losses(d, args, names, shapes, init, toks, backend):
    """The run of DIR in PyTorch; returns its losses and step 1's gradients by name."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    model, params = model_from(names, shapes, init, args.heads, dir_activation(d))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, eps=1e-8, foreach=False)
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    losses, grads, skipped = [], {}, []
    for step in range(toks.shape[0]):
        b = torch.from_numpy(toks[step].astype(np.int64)).to("cuda")
        opt.zero_grad(set_to_none=True)
        with autocast(args), sdpa_kernel(backend):
            loss = model(b[:, :-1], b[:, 1:])
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        if step == 0:
            grads = {n: params[n].grad.detach().clone() for n in names}
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        scale = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        if scaler.is_enabled() and scaler.get_scale() < scale:
            skipped.append(step + 1)
        losses.append(loss.item())
    if skipped:
        print(f"torch ({backend.name}): steps skipped for inf/NaN gradients: {skipped}")
    return losses, grads


def check_mixed(d, args, names, shapes, init, toks, losses, g1):
    from torch.nn.attention import SDPBackend
    a, grads = train_losses(d, args, names, shapes, init, toks, SDPBackend.FLASH_ATTENTION)
    b, grads_b = train_losses(d, args, names, shapes, init, toks, SDPBackend.EFFICIENT_ATTENTION)
    worst_grad, worst_torch, at = 0.0, 0.0, 0
    for n in names:
        p = grads[n]
        k = p.numel()
        worst_grad = max(worst_grad, rel(torch.from_numpy(g1[at:at + k]).to("cuda").view_as(p), p))
        worst_torch = max(worst_torch, rel(grads_b[n], p))
        at += k
    dv = [abs(x - y) for x, y in zip(losses, a)]
    dt = [abs(x - y) for x, y in zip(b, a)]
    print(f"{'step':>4} {'vram':>10} {'torch flash':>12} {'torch eff.':>11} {'|vram-flash|':>13} {'|eff.-flash|':>13}")
    for i in range(len(losses)):
        if i < 5 or (i + 1) % 20 == 0 or dv[i] > 0.05:
            print(f"{i + 1:>4} {losses[i]:>10.5f} {a[i]:>12.5f} {b[i]:>11.5f} {dv[i]:>13.2e} {dt[i]:>13.2e}")
    tail = max(1, len(losses) // 10)
    mv, mt = statistics.mean(dv), statistics.mean(dt)
    ok = mv <= 2 * mt + 1e-3 and abs(statistics.mean(losses[-tail:]) - statistics.mean(a[-tail:])) < 0.02
    print(f"check {args.precision}: {len(losses)} steps; mean |vram - torch| {mv:.2e} (max {max(dv):.2e}); PyTorch's "
          f"own spread (flash vs memory-efficient attention) mean {mt:.2e} (max {max(dt):.2e}); mean loss of the last "
          f"{tail} steps vram {statistics.mean(losses[-tail:]):.4f}, torch {statistics.mean(a[-tail:]):.4f}; step-1 "
          f"gradients worst relative norm difference {worst_grad:.2e} (PyTorch's own {worst_torch:.2e}): "
          f"{'PASS' if ok else 'FAIL'} (bound: mean "
          f"difference within twice PyTorch's spread + 1e-3, last-steps mean within 0.02)")
    return 0 if ok else 1


def check(d, args):
    names = [ln.split() for ln in open(os.path.join(d, "params.txt"))]
    shapes = [tuple(int(x) for x in s.split(",")) for _, s in names]
    names = [n for n, _ in names]
    dev = "cuda"
    init = np.fromfile(os.path.join(d, "init.bin"), dtype=np.float32)
    model, params = model_from(names, shapes, init, args.heads, dir_activation(d))
    order = [params[n] for n in names]
    losses = [float(x) for x in open(os.path.join(d, "losses.txt"))]
    steps = len(losses)
    toks = np.fromfile(os.path.join(d, "batches.bin"), dtype=np.int32).reshape(steps, args.batch, -1)
    g1 = np.fromfile(os.path.join(d, "grads1.bin"), dtype=np.float32)
    if args.precision != "fp32":
        return check_mixed(d, args, names, shapes, init, toks, losses, g1)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, eps=1e-8, foreach=False)
    worst_loss, worst_grad, bad = 0.0, 0.0, 0
    print(f"{'step':>4} {'vram loss':>12} {'torch loss':>12} {'rel diff':>10}")
    for step in range(steps):
        b = torch.from_numpy(toks[step].astype(np.int64)).to(dev)
        opt.zero_grad(set_to_none=True)
        loss = model(b[:, :-1], b[:, 1:])
        loss.backward()
        if step == 0:
            at = 0
            for n, p in zip(names, order):
                k = p.numel()
                ours = torch.from_numpy(g1[at:at + k]).to(dev).view_as(p)
                r = rel(ours, p.grad)
                worst_grad = max(worst_grad, r)
                if r > 1e-3:
                    bad += 1
                    print(f"gradient of {n}: relative norm difference {r:.3g} > 1e-3")
                at += k
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        r = abs(losses[step] - loss.item()) / abs(loss.item())
        worst_loss = max(worst_loss, r)
        bad += r > 1e-4
        print(f"{step + 1:>4} {losses[step]:>12.6f} {loss.item():>12.6f} {r:>10.2e}")
    print(f"check: {steps} steps, worst loss difference {worst_loss:.2e} (bound 1e-4), worst gradient "
          f"difference after step 1 {worst_grad:.2e} over {len(names)} parameters (bound 1e-3): "
          f"{'PASS' if not bad else 'FAIL'}")
    return 1 if bad else 0


def speed(args):
    dev = "cuda"
    B, T = args.batch, 1024
    rows = []
    for kind in args.models.split(","):
        torch.manual_seed(0)
        if kind.startswith("hf"):
            from transformers import GPT2Config, GPT2LMHeadModel
            model = GPT2LMHeadModel(GPT2Config()).to(dev)
            if kind == "hf-ckpt":
                model.gradient_checkpointing_enable()
            model.train()
            hf_fn = torch.compile(model) if kind == "hf-compile" else model
            step_fn = lambda x, y: hf_fn(input_ids=x, labels=y).loss  # noqa: E731 (labels shift inside)
        else:
            model = GPT(12, 12, 768, 50257, 1024, args.activation).to(dev)
            step_fn = torch.compile(model) if kind == "same-compile" else model
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
        data = torch.randint(0, 50257, (B, T + 1), device=dev)
        x, y = (data[:, :-1], data[:, :-1]) if kind.startswith("hf") else (data[:, :-1], data[:, 1:])
        scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
        torch.cuda.reset_peak_memory_stats()
        times = []
        for i in range(args.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with autocast(args):
                loss = step_fn(x, y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            loss.item()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        med = statistics.median(times[6:] if kind.endswith("compile") else times[3:])
        rows.append((kind, med * 1e3, B * T / med, torch.cuda.max_memory_allocated() / 2**30,
                     torch.cuda.max_memory_reserved() / 2**30))
        del model, opt, loss
        torch.cuda.empty_cache()
    prec = "fp32 (TF32 off)" if args.precision == "fp32" else f"{args.precision} autocast"
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, {prec}, B={B}, T={T}, fused AdamW, "
          f"same-layout GELU {args.activation}, "
          f"clip 1.0, median of steps 4..{args.steps} (torch.compile: after its compiling steps)")
    names = {"hf": "HF GPT2LMHeadModel eager", "hf-ckpt": "HF eager, checkpointing",
             "hf-compile": "HF torch.compile", "same": "same-layout model eager",
             "same-compile": "same-layout torch.compile"}
    for kind, ms, tps, pa, pr in rows:
        name = names.get(kind, kind)
        print(f"torch {name:<26} {ms:8.1f} ms/step {tps:9.0f} tokens/s  peak allocated {pa:6.2f} GiB  reserved {pr:6.2f} GiB")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["check", "speed"])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--models", default="hf,same")
    ap.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--activation", choices=["gelu_tanh", "gelu_erf"], default="gelu_tanh",
                    help="speed: the same-layout model's GELU (GPT-2's tanh, vram train's gpt2 default; gelu_erf)")
    args = ap.parse_args()
    if args.mode == "check":
        if not args.dir:
            ap.error("check needs DIR")
        return check(args.dir, args)
    return speed(args)


if __name__ == "__main__":
    sys.exit(main())

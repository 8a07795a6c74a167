#!/usr/bin/env python3
"""train_cpu_torch.py — the PyTorch side of bench/compare_train_cpu.sh.

Trains the same GPT as `vram train` (GPT-2 block layout, untied bias-free head, exact GELU,
AdamW, clip 1.0, byte-level KJV batches) on the CPU and prints the median step time, tokens/s
and memory. Memory: PyTorch 1.13 has no CPU allocator statistics, so the bytes held in glibc malloc
(mallinfo2: in-use arena + mmapped blocks, where PyTorch's CPU tensors live) are sampled at
the phase boundaries of a step (end of forward, after each module's backward, end of backward,
after the optimizer step)
and the largest sample minus the sample taken before the model existed is printed, as is the
process's peak RSS.

usage: /usr/bin/python3 bench/train_cpu_torch.py CORPUS STEPS BATCH LAYERS HEADS WIDTH CONTEXT THREADS
"""
import ctypes
import math
import resource
import statistics
import sys
import time

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", sys.argv[8] if len(sys.argv) > 8 else "1")  # OpenBLAS ignores torch.set_num_threads
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

corpus, steps, B, L, H, C, T, threads = sys.argv[1], *map(int, sys.argv[2:9])
torch.set_num_threads(threads)
torch.manual_seed(1337)
data = torch.frombuffer(bytearray(open(corpus, "rb").read()), dtype=torch.uint8)
train = data[: int(len(data) * 0.9)]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = [z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(b, t, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(256, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f, self.lm_head = nn.LayerNorm(C), nn.Linear(C, 256, bias=False)

    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.h:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, 256), tgt.view(-1))


class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2


def heap_bytes():
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd


heap0 = heap_bytes()
samples = {}
model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
# also sample inside backward, after each module's gradients (where backward temporaries live)
for mod in model.modules():
    if mod is not model:
        mod.register_full_backward_hook(lambda *_: sample("during backward"))


def batch():
    ix = torch.randint(len(train) - T - 1, (B,))
    x = torch.stack([train[i : i + T] for i in ix]).long()
    y = torch.stack([train[i + 1 : i + T + 1] for i in ix]).long()
    return x, y


def sample(phase):
    samples[phase] = max(samples.get(phase, 0), heap_bytes() - heap0)


def step():
    opt.zero_grad(set_to_none=True)
    x, y = batch()
    loss = model(x, y)
    sample("end of forward")
    loss.backward()
    sample("end of backward")
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sample("after step")
    return loss.item()


times, loss = [], float("nan")
for s in range(steps):
    t0 = time.perf_counter()
    loss = step()
    times.append(time.perf_counter() - t0)

med = statistics.median(times[2:]) if len(times) > 2 else statistics.median(times)
print(f"torch {torch.__version__}, {threads} threads, {sum(p.numel() for p in model.parameters())} parameters, "
      f"BLAS_INFO={torch.__config__.show().split('BLAS_INFO=')[1].split(',')[0]} (the libblas.so.3 that Debian's alternatives select)")
print(f"torch: median step {med * 1e3:.1f} ms, {B * T / med:.0f} tokens/s, final loss {loss:.4f}")
print("torch: heap in use above the start (mallinfo2), max over steps: " +
      ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in samples.items()))
print(f"torch: process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")

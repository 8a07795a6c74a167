"""test_safetensors_gpt2.py — a GPT-2 in PyTorch's safetensors layout, made here, loaded by
`vram generate`, against a pure-Python GPT-2 forward (no numpy or torch needed).

    python3 test_safetensors_gpt2.py VRAM_EXE CORPUS

The file is what `model.save_pretrained(safe_serialization=True)` of a GPT2LMHeadModel holds:
transformer.* names, Conv1D weights [in, out], lm_head tied (absent), the attention mask buffer
(attn.bias) present, one tensor in F16 and one in BF16; GELU is GPT-2's tanh form. The tied head
is held once (the weights' bytes are the file's tensors', without a second wte). The reference
forward below follows Hugging Face's modeling_gpt2 step by step in float64. Also: GPT2Model's
names (no "transformer." prefix) load the same; a model vram trained and saved as safetensors
gives the logits of the same model saved as .vram; another architecture's tensors, a truncated
file and a bad header are errors with status 2.
"""
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done, run  # noqa: E402

L, H, C, V, CTX = 2, 2, 32, 256, 16


def f16_round(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def bf16_bits(x):
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16


def bf16_round(x):
    return struct.unpack("<f", struct.pack("<I", bf16_bits(x) << 16))[0]


def f32_round(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def make_weights(rng):
    """name -> (dtype, shape, flat values as stored, already rounded to the dtype)."""
    w = {}

    def add(name, shape, scale, dtype="F32", base=0.0):
        n = 1
        for d in shape:
            n *= d
        rnd = {"F32": f32_round, "F16": f16_round, "BF16": bf16_round}[dtype]
        w[name] = (dtype, shape, [rnd(base + rng.gauss(0, scale)) for _ in range(n)])

    add("transformer.wte.weight", [V, C], 0.5)
    add("transformer.wpe.weight", [CTX, C], 0.2, "F16")
    for l in range(L):
        p = "transformer.h.%d." % l
        add(p + "ln_1.weight", [C], 0.1, base=1.0)
        add(p + "ln_1.bias", [C], 0.1)
        add(p + "attn.c_attn.weight", [C, 3 * C], 0.3)
        add(p + "attn.c_attn.bias", [3 * C], 0.1)
        add(p + "attn.c_proj.weight", [C, C], 0.2)
        add(p + "attn.c_proj.bias", [C], 0.1)
        add(p + "ln_2.weight", [C], 0.1, base=1.0)
        add(p + "ln_2.bias", [C], 0.1)
        add(p + "mlp.c_fc.weight", [C, 4 * C], 0.2, "BF16" if l == 0 else "F32")
        add(p + "mlp.c_fc.bias", [4 * C], 0.1)
        add(p + "mlp.c_proj.weight", [4 * C, C], 0.1)
        add(p + "mlp.c_proj.bias", [C], 0.1)
    add("transformer.ln_f.weight", [C], 0.1, base=1.0)
    add("transformer.ln_f.bias", [C], 0.1)
    return w


def write_safetensors(path, weights, metadata, extra=None):
    header, blobs, off = {"__metadata__": metadata}, [], 0
    items = list(weights.items()) + list((extra or {}).items())
    for name, (dtype, shape, vals) in items:
        if dtype == "F32":
            blob = struct.pack("<%df" % len(vals), *vals)
        elif dtype == "F16":
            blob = struct.pack("<%de" % len(vals), *vals)
        else:
            blob = struct.pack("<%dH" % len(vals), *[bf16_bits(v) for v in vals])
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ---- the reference: Hugging Face GPT2LMHeadModel's forward, in float64 ----

def layer_norm(x, w, b):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    r = 1.0 / math.sqrt(var + 1e-5)
    return [(v - mean) * r * w[i] + b[i] for i, v in enumerate(x)]


def conv1d(x, w, b, n_in, n_out):  # w [in, out] row-major
    return [b[o] + sum(x[i] * w[i * n_out + o] for i in range(n_in)) for o in range(n_out)]


def gelu_new(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def reference_logits(w, tokens):
    g = lambda n: w[n][2]  # noqa: E731
    T, D = len(tokens), C // H
    xs = [[g("transformer.wte.weight")[t * C + c] + g("transformer.wpe.weight")[p * C + c] for c in range(C)]
          for p, t in enumerate(tokens)]
    for l in range(L):
        p = "transformer.h.%d." % l
        qkv = [conv1d(layer_norm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias")), g(p + "attn.c_attn.weight"),
                      g(p + "attn.c_attn.bias"), C, 3 * C) for x in xs]
        att = [[0.0] * C for _ in range(T)]
        for h in range(H):
            for t in range(T):
                q = qkv[t][h * D:(h + 1) * D]
                s = [sum(q[d] * qkv[j][C + h * D + d] for d in range(D)) / math.sqrt(D) for j in range(t + 1)]
                m = max(s)
                e = [math.exp(v - m) for v in s]
                z = sum(e)
                for d in range(D):
                    att[t][h * D + d] = sum(e[j] / z * qkv[j][2 * C + h * D + d] for j in range(t + 1))
        xs = [[x[c] + a[c] for c in range(C)] for x, a in
              zip(xs, [conv1d(a, g(p + "attn.c_proj.weight"), g(p + "attn.c_proj.bias"), C, C) for a in att])]
        hs = [conv1d(layer_norm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias")), g(p + "mlp.c_fc.weight"),
                     g(p + "mlp.c_fc.bias"), C, 4 * C) for x in xs]
        ms = [conv1d([gelu_new(v) for v in h_], g(p + "mlp.c_proj.weight"), g(p + "mlp.c_proj.bias"), 4 * C, C)
              for h_ in hs]
        xs = [[x[c] + m_[c] for c in range(C)] for x, m_ in zip(xs, ms)]
    out = []
    wte = g("transformer.wte.weight")
    for x in xs:
        y = layer_norm(x, g("transformer.ln_f.weight"), g("transformer.ln_f.bias"))
        out.append([sum(y[c] * wte[v * C + c] for c in range(C)) for v in range(V)])
    return out


def read_logits(path, rows):
    with open(path, "rb") as f:
        data = f.read()
    vals = struct.unpack("<%df" % (len(data) // 4), data)
    return [list(vals[r * V:(r + 1) * V]) for r in range(len(vals) // V)] if len(vals) == rows * V else None


def max_diff(a, b):
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    vram, corpus = sys.argv[1:]
    prompt = "Hello, GPT-2!"
    tokens = list(prompt.encode())
    with tempfile.TemporaryDirectory() as tmp:
        w = make_weights(random.Random(43))
        ref = reference_logits(w, tokens)
        scale = max(abs(v) for row in ref for v in row)
        mask = {"transformer.h.%d.attn.bias" % l: ("F32", [1, 1, CTX, CTX],
                                                   [1.0 if j <= i else 0.0 for i in range(CTX) for j in range(CTX)])
                for l in range(L)}
        st = os.path.join(tmp, "gpt2.safetensors")
        write_safetensors(st, w, {"format": "pt", "n_head": str(H)}, mask)
        out = os.path.join(tmp, "logits.bin")
        r = run([vram, "generate", "--model", st, "--prompt", prompt, "--tokens", "1", "--logits", out])
        check(r.returncode == 0, "vram generate on the safetensors file: %d %s" % (r.returncode, r.stderr))
        check("2 layers, 2 heads, width 32, vocab 256, context 16, tanh GELU" in r.stdout, "shape read: " + r.stdout[:300])
        # the head is wte itself (no lm_head.weight in the file): held and counted once, as PyTorch does
        held = "weights f32, %.3f MiB" % (4 * sum(len(v[2]) for v in w.values()) / 2**20)
        check(held in r.stdout, "the tied head is not a second copy: want '%s' in %s" % (held, r.stdout[:400]))
        got = read_logits(out, len(tokens)) if r.returncode == 0 else None
        if check(got is not None, "logits file of [%d, %d]" % (len(tokens), V)):
            d = max_diff(got, ref)
            print("max |vram - reference| = %.3g (logits up to %.3g)" % (d, scale))
            check(d < 1e-4 * max(1.0, scale), "logits equal the reference within f32 tolerance: %g" % d)

        # GPT2Model's names: no "transformer." prefix, lm_head tied
        bare = os.path.join(tmp, "bare.safetensors")
        write_safetensors(bare, {k[len("transformer."):]: v for k, v in w.items()}, {"n_head": str(H)})
        out2 = os.path.join(tmp, "logits2.bin")
        r = run([vram, "generate", "--model", bare, "--prompt", prompt, "--tokens", "1", "--logits", out2])
        check(r.returncode == 0 and read_logits(out2, len(tokens)) == got, "unprefixed names give the same logits")

        # INT8 on the loaded model: close to f32
        out3 = os.path.join(tmp, "logits3.bin")
        r = run([vram, "generate", "--model", st, "--prompt", prompt, "--tokens", "1", "--logits", out3, "--int8"])
        q = read_logits(out3, len(tokens)) if r.returncode == 0 else None
        check(q is not None and 0 < max_diff(q, ref) < 0.05 * max(1.0, scale),
              "int8 logits near the reference: %s" % (max_diff(q, ref) if q else r.stderr))

        # a model vram trained, saved both ways
        common = ["--data", corpus, "--steps", "2", "--batch", "2", "--layers", "1", "--heads", "2", "--width", "32",
                  "--context", "16", "--seed", "5"]
        sv, ss = os.path.join(tmp, "m.vram"), os.path.join(tmp, "m.safetensors")
        r1 = run([vram, "train"] + common + ["--save", sv])
        r2 = run([vram, "train"] + common + ["--save", ss])
        check(r1.returncode == 0 and r2.returncode == 0, "train --save both ways: %s %s" % (r1.stderr, r2.stderr))
        la, lb = os.path.join(tmp, "a.bin"), os.path.join(tmp, "b.bin")
        ra = run([vram, "generate", "--model", sv, "--prompt", "In the", "--tokens", "1", "--logits", la])
        rb = run([vram, "generate", "--model", ss, "--prompt", "In the", "--tokens", "1", "--logits", lb])
        check(ra.returncode == 0 and rb.returncode == 0 and "erf GELU" in rb.stdout, "both load: %s %s" % (ra.stderr, rb.stderr))
        if ra.returncode == 0 and rb.returncode == 0:
            check(open(la, "rb").read() == open(lb, "rb").read(), "safetensors round trip: the same logits bit for bit")

        # bad input: another architecture, truncated, bad header
        llama = os.path.join(tmp, "llama.safetensors")
        write_safetensors(llama, dict(w, **{"model.layers.0.self_attn.q_proj.weight": ("F32", [2, 2], [0.0] * 4)}),
                          {"n_head": "2"})
        r = run([vram, "generate", "--model", llama, "--prompt", "x"])
        check(r.returncode == 2 and "another architecture" in r.stderr, "another architecture: %d %s" % (r.returncode, r.stderr))
        data = open(st, "rb").read()
        cut = os.path.join(tmp, "cut.safetensors")
        open(cut, "wb").write(data[:len(data) - 100])
        r = run([vram, "generate", "--model", cut, "--prompt", "x"])
        check(r.returncode == 2 and "do not fit" in r.stderr, "truncated: %d %s" % (r.returncode, r.stderr))
        open(cut, "wb").write(struct.pack("<Q", 20) + b'{"a": {"dtype": "F3' + b"\0" * 64)
        r = run([vram, "generate", "--model", cut, "--prompt", "x"])
        check(r.returncode == 2 and "safetensors" in r.stderr, "bad header: %d %s" % (r.returncode, r.stderr))
    return done("test_safetensors_gpt2")


if __name__ == "__main__":
    sys.exit(main())

"""test_gpu_generate.py — `vram generate --device cuda:0` against the same command on the CPU.

    python3 test_gpu_generate.py VRAM_EXE CORPUS

A small model trained here on the CPU (30 steps) generates greedily on the GPU and on the CPU, with
f32, bf16, Q8_0 and Q8_R weights: the same token ids (--print-ids) for a batch of two prompts of
different lengths, logits (--logits) within a relative error of 1e-4, a KV cache and weights in the
GPU allocator's memory table, and the speed line naming the GPU. Also the held-out perplexity
(--eval) on both within 1e-4. Bad input: a device that is not cpu or cuda[:N] is status 2; a GPU
ordinal that does not exist is status 1 with one message. Skipped (77) without a GPU.
"""
import os
import re
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pycheck import check, done, run  # noqa: E402


def floats(path):
    data = open(path, "rb").read()
    return struct.unpack("<%df" % (len(data) // 4), data)


def rel_err(a, b):
    num = sum((x - y) ** 2 for x, y in zip(a, b))
    den = sum(x * x for x in a)
    return (num / den) ** 0.5 if den else num ** 0.5


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    vram, corpus = sys.argv[1:]
    if run([vram, "smi", "--list"]).returncode != 0 and not os.path.exists("/dev/nvidiactl"):
        print("SKIP: no GPU")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.vram")
        r = run([vram, "train", "--data", corpus, "--steps", "30", "--layers", "2", "--heads", "2", "--width", "64",
                 "--context", "64", "--batch", "8", "--seed", "5", "--save", model])
        if not check(r.returncode == 0, "training the model: " + r.stderr):
            sys.exit(done("test_gpu_generate"))
        base = [vram, "generate", "--model", model, "--prompt", "And God said unto", "--prompt", "In the",
                "--tokens", "24", "--temperature", "0", "--print-ids"]
        for q in ([], ["--bf16"], ["--int8"], ["--int8-row"]):
            name = q[0] if q else "f32"
            lc, lg = os.path.join(tmp, "cpu.bin"), os.path.join(tmp, "gpu.bin")
            c = run(base + q + ["--logits", lc])
            g = run(base + q + ["--logits", lg, "--device", "cuda:0"])
            if not check(c.returncode == 0 and g.returncode == 0, "%s: cpu rc %d, gpu rc %d: %s %s"
                         % (name, c.returncode, g.returncode, c.stderr, g.stderr)):
                continue
            ids = lambda out: re.findall(r"^ids \d+: (.*)$", out, re.M)  # noqa: E731
            check(len(ids(g.stdout)) == 2 and ids(g.stdout) == ids(c.stdout),
                  "%s: the GPU's greedy tokens equal the CPU's: %s vs %s" % (name, ids(g.stdout), ids(c.stdout)))
            e = rel_err(floats(lc), floats(lg))
            check(len(floats(lc)) == 17 * 256 and e < 1e-4, "%s: GPU logits vs CPU relative error %.3g" % (name, e))
            wfmt = {"f32": "f32", "--bf16": "bf16", "--int8": "q8_0", "--int8-row": "q8_r"}[name]
            check(re.search(r"tokens/s \(batch 2, kv cache, %s\) on cuda" % wfmt, g.stdout),
                  "%s: the speed line names the weights and the GPU: %s" % (name, g.stdout[-600:]))
            check(re.search(r"kv cache +0\.000 MiB +0\.[0-9]*[1-9][0-9]* MiB", g.stdout)
                  and re.search(r"weights +0\.[0-9]*[1-9]", g.stdout) and "weights copied to cuda" in g.stdout,
                  "%s: the GPU allocator's table holds the weights and a KV cache: %s" % (name, g.stdout[-600:]))
        ev = [vram, "generate", "--model", model, "--eval", corpus, "--eval-tokens", "2048"]
        c, g = run(ev), run(ev + ["--device", "cuda:0"])
        ppl = lambda out: float(re.search(r"perplexity ([0-9.]+)", out).group(1))  # noqa: E731
        if check(c.returncode == 0 and g.returncode == 0, "eval: %s %s" % (c.stderr, g.stderr)):
            check(abs(ppl(c.stdout) / ppl(g.stdout) - 1) < 1e-4, "perplexity GPU %s vs CPU %s" % (ppl(g.stdout), ppl(c.stdout)))
        r = run(base + ["--device", "tpu"])
        check(r.returncode == 2 and "not cpu or cuda" in r.stderr, "--device tpu: status 2: %d %s" % (r.returncode, r.stderr))
        r = run(base + ["--device", "cuda:63"])
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and "cuda:63" in r.stderr,
              "a GPU that does not exist: status 1, one line: %d %r" % (r.returncode, r.stderr))
    sys.exit(done("test_gpu_generate"))


if __name__ == "__main__":
    main()

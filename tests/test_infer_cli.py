"""test_infer_cli.py — `vram train --save/--resume`, `vram generate` and `vram quantize` from the
command line.

    python3 test_infer_cli.py VRAM_EXE CORPUS

- a run of 8 steps, and a run of 4 steps saved every 2 then resumed to 8: the same loss at every
  step (printed to 4 places) and byte-identical final files (weights, optimizer state, step and
  random state: every bit);
- the held-out perplexity of the trained model with INT8 (Q8_0) weights is within +0.5% of f32's,
  with weights at most 0.27 of f32's bytes, from --int8 and from a `vram quantize`d file alike;
- cached and uncached (--no-cache) generation print the same text; memory by category shows a
  KV cache and no activations;
- bad input, each one message and exit status 2: a corrupted, truncated or foreign model file,
  a prompt longer than the context, --int8 on a quantized model, resuming with another shape;
- --tokenizer (GPT-2's BPE, the fixture files of tests/reference/bpe): the prompt's ids are the
  reference encoder's and the prompt prints decoded; a missing tokenizer, one larger than the
  model's vocabulary and a prompt that is not UTF-8 are status 2.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done, run  # noqa: E402

SHAPE = ["--layers", "2", "--heads", "2", "--width", "64", "--context", "32"]


def losses(out):
    return re.findall(r"^step +(\d+)(?:/\d+)? \| loss ([0-9.]+)", out, re.M)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    vram, corpus = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        p = lambda n: os.path.join(tmp, n)  # noqa: E731
        common = [vram, "train", "--data", corpus, "--batch", "8", "--seed", "3", "--threads", "2", "--log-every", "1"] + SHAPE
        full = run(common + ["--steps", "8", "--save", p("full.vram")])
        half = run(common + ["--steps", "4", "--save", p("half.vram"), "--save-every", "2"])
        rest = run(common + ["--steps", "8", "--resume", p("half.vram"), "--save", p("rest.vram")])
        check(full.returncode == 0 and half.returncode == 0 and rest.returncode == 0,
              "train runs: %s %s %s" % (full.stderr, half.stderr, rest.stderr))
        check(half.stdout.count("saved step") == 2, "--save-every 2 saved at steps 2 and 4")
        check("resumed '%s' at step 4" % p("half.vram") in rest.stdout and "MiB copied from the file" in rest.stdout,
              "resume reports its step and bytes: " + rest.stdout[:200])
        lf, lr = losses(full.stdout), losses(half.stdout) + losses(rest.stdout)
        check(len(lf) == 8 and lf == lr, "resumed losses equal the uninterrupted run's: %s vs %s" % (lf, lr))
        check(open(p("full.vram"), "rb").read() == open(p("rest.vram"), "rb").read(),
              "the resumed run's final file is byte-identical to the uninterrupted run's")

        # a model worth measuring: 150 steps (40 in the sanitizer build, ten times slower)
        model = p("m.vram")
        steps = "40" if os.environ.get("VRAM_TEST_SANITIZED") else "150"
        r = run(common + ["--steps", steps, "--save", model])
        check(r.returncode == 0, "training %s steps: %s" % (steps, r.stderr))
        ev = [vram, "generate", "--model", model, "--eval", corpus, "--eval-tokens", "4096"]
        e32, e8, e8r = run(ev), run(ev + ["--int8"]), run(ev + ["--int8-row"])
        r = run([vram, "quantize", model, p("q.vram")])
        check(r.returncode == 0 and "wrote" in r.stdout, "quantize: " + r.stderr)
        eq = run([vram, "generate", "--model", p("q.vram"), "--eval", corpus, "--eval-tokens", "4096"])
        ppl = lambda out: float(re.search(r"perplexity ([0-9.]+)", out).group(1))  # noqa: E731
        if check(e32.returncode == 0 and e8.returncode == 0 and eq.returncode == 0, "eval: %s %s" % (e32.stderr, e8.stderr)):
            a, b, c = ppl(e32.stdout), ppl(e8.stdout), ppl(eq.stdout)
            print("held-out perplexity f32 %.6f, int8 %.6f (%+.4f%%)" % (a, b, 100 * (b / a - 1)))
            check(b <= a * 1.005, "int8 perplexity within +0.5%% of f32: %f vs %f" % (b, a))
            check(b == c, "--int8 and a quantized file give the same perplexity: %f %f" % (b, c))
            if check(e8r.returncode == 0, "--int8-row: " + e8r.stderr):
                d = ppl(e8r.stdout)
                print("held-out perplexity int8 per output channel %.6f (%+.4f%%)" % (d, 100 * (d / a - 1)))
                check(d <= a * 1.005, "int8 (per channel) perplexity within +0.5%% of f32: %f vs %f" % (d, a))
            ratio = float(re.search(r"\(([0-9.]+) of f32\)", e8.stdout).group(1))
            check(ratio <= 0.28, "int8 weights %.4f of f32 (this small model's biases weigh in)" % ratio)

        gen = [vram, "generate", "--model", model, "--prompt", "And God said", "--prompt", "In the", "--tokens", "16",
               "--temperature", "0"]
        a, b = run(gen), run(gen + ["--no-cache"])
        text = lambda out: out[out.find("--- prompt 1"):out.find("\n---\n")] if "--- prompt" in out else None  # noqa: E731
        check(a.returncode == 0 and b.returncode == 0 and text(a.stdout) and text(a.stdout) == text(b.stdout),
              "cached and uncached generation print the same text")
        check(re.search(r"kv cache +0\.000 MiB +0\.0[0-9]+ MiB", a.stdout) and re.search(r"activations +0\.000 MiB +0\.000 MiB", a.stdout),
              "memory by category: a kv cache, no activations:\n" + a.stdout)
        check(re.search(r"decode: 30 tokens in [0-9.]+ ms = [0-9.]+ tokens/s \(batch 2, kv cache, f32\)", a.stdout),
              "tokens/s line: " + a.stdout)

        # bad input
        data = open(model, "rb").read()
        bad = p("bad.vram")

        def expect(cmd, words, what):
            r = run(cmd)
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 2 and words in r.stderr and len(lines) == 1,
                  "%s: status %d, %r" % (what, r.returncode, r.stderr))

        open(bad, "wb").write(data[:5000] + bytes([data[5000] ^ 1]) + data[5001:])
        expect([vram, "generate", "--model", bad, "--prompt", "x"], "checksum mismatch", "corrupted file")
        open(bad, "wb").write(data[:len(data) // 2])
        expect([vram, "generate", "--model", bad, "--prompt", "x"], "truncated", "truncated file")
        expect([vram, "generate", "--model", corpus, "--prompt", "x"], "neither a vram model file nor safetensors", "foreign file")
        expect([vram, "generate", "--model", model, "--prompt", "x" * 40], "longer than the model's context of 32", "long prompt")
        expect([vram, "generate", "--model", p("q.vram"), "--prompt", "x", "--int8"], "already q8_0", "--int8 twice")
        expect([vram, "quantize", p("q.vram"), p("qq.vram")], "already q8_0", "quantize twice")
        expect(common[:2] + ["--data", corpus, "--steps", "9", "--resume", p("half.vram"), "--width", "128"],
               "this run's model", "resume with another shape")
        expect(common + ["--steps", "3", "--resume", p("half.vram")], "at step 4 already", "resume past --steps")
        expect(common + ["--steps", "9", "--resume", p("q.vram")], "quantized", "resume a quantized model")

        # GPT-2's BPE (--tokenizer): the fixture vocabulary of tests/reference/bpe (857 tokens) on a
        # model with room for them; the prompt's ids are the reference encoder's (cases.txt)
        bpe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference", "bpe")
        big = p("big.vram")
        r = run(common[:2] + ["--data", corpus, "--steps", "2", "--vocab", "1024", "--save", big] + SHAPE)
        check(r.returncode == 0, "a model with a 1024-token vocabulary: " + r.stderr)
        line = "And God said, Let there be light: and there was light."
        r = run([vram, "generate", "--model", big, "--tokenizer", bpe, "--prompt", line, "--tokens", "6",
                 "--temperature", "0", "--print-ids"])
        cases = open(os.path.join(bpe, "cases.txt")).read().split("\n")
        want = cases[cases.index(line.encode().hex()) + 2]
        m = re.search(r"^prompt ids 1: (.*)$", r.stdout, re.M)
        if check(r.returncode == 0 and m, "generate --tokenizer: %s" % r.stderr):
            check(m.group(1) == want, "the prompt's BPE ids are the reference's: %s vs %s" % (m.group(1), want))
            check("--- prompt 1\n" + line in r.stdout, "the prompt is printed decoded: " + r.stdout[:300])
        expect([vram, "generate", "--model", big, "--tokenizer", p("nowhere"), "--prompt", "x"], "cannot open the vocabulary",
               "a missing tokenizer")
        expect([vram, "generate", "--model", model, "--tokenizer", bpe, "--prompt", "x"],
               "its 857 tokens exceed the model's vocabulary of 256", "a tokenizer larger than the model's vocabulary")
        expect([vram, "generate", "--model", big, "--tokenizer", bpe, "--prompt", b"ok \xff"], "not valid UTF-8 at byte 3",
               "a prompt that is not UTF-8")
        expect([vram, "generate", "--model", big, "--tokenizer", bpe, "--eval", corpus], "does not take --tokenizer",
               "--eval with a tokenizer")
    return done("test_infer_cli")


if __name__ == "__main__":
    sys.exit(main())

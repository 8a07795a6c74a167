#!/usr/bin/env python3
"""Tests of `python -m vram_torch fit` (python/vram_torch/fit.py) on synthetic traces, no PyTorch.

A synthetic training program (parameters and optimizer state of fixed size, activations in
proportion to the batch, a constant-plus-multiple workspace, frees in the program's order)
is written as memtrace v1 at small batches; fit must learn it, synthesize the stream at a large
batch byte for byte as the program writes it, and find by replay the batch that a brute-force
search over the program's own traces finds. Traces of another shape are refused with a message.

    python3 tests/test_vram_torch_fit.py VRAM_EXE
"""
import gzip
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from vram_torch import fit  # noqa: E402

VRAM = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("VRAM", "vram")
failed = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failed.append(what)


def program(batch, layers=6, steps=2, ids_from=1):
    """A training step's allocations as a memtrace v1 text at `batch`."""
    out, nid = ["# memtrace v1", "# source: synthetic"], [ids_from]

    def alloc(size, stream=0):
        i = nid[0]
        nid[0] += 1
        out.append("a %d %d %d" % (i, size, stream))
        return i

    def free(i):
        out.append("f %d" % i)

    params = [alloc(3 << 20) for _ in range(layers)]
    state = []
    for _ in range(steps):
        acts = []
        for _ in range(layers):
            tmp = alloc(4096 + 8192 * batch)  # a workspace: constant + per sample
            acts.append(alloc(262144 * batch))
            free(tmp)
        loss = alloc(4)
        grads = []
        for a in reversed(acts):
            g = alloc(262144 * batch, stream=1)
            free(a)
            free(g)
            grads.append(alloc(3 << 20))
        free(loss)
        if not state:
            state = [alloc(3 << 20) for _ in range(2 * layers)]
        for g in grads:
            free(g)
    for i in params + state:
        free(i)
    return "\n".join(out) + "\n"


def write(tmp, name, text, gz=False):
    path = os.path.join(tmp, name)
    with (gzip.open(path, "wt") if gz else open(path, "w")) as f:
        f.write(text)
    return path


def events_of(text, tmp, name):
    return fit.load_trace(write(tmp, name, text))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        traces = {b: events_of(program(b), tmp, "b%d.trace" % b) for b in (2, 4)}
        model = fit.learn(traces)
        check(events_of(fit.synthesize(model, 96), tmp, "s96.trace") == events_of(program(96), tmp, "p96.trace"),
              "two traces: the stream at batch 96 synthesized event for event (sizes, streams, order)")
        gz = fit.load_trace(write(tmp, "b8.trace.gz", program(8), gz=True))
        model3 = fit.learn({2: traces[2], 4: traces[4], 8: gz})
        check(model3 == model, "a third trace (gzip) agrees with the linear rule")

        # search: the batch fit finds equals a brute-force search over the program's own traces
        capacity = 160 << 20
        batch, res, tried = fit.search(model, capacity, VRAM)
        truth = 0
        for b in range(1, 200):
            r = fit.replay(VRAM, program(b), capacity)
            if r["oom"]:
                break
            truth = b
        check(batch == truth and batch > 4, "search: batch %d, brute force %d" % (batch, truth))
        check(not res["oom"] and res["peak_reserved_bytes"] <= capacity, "the chosen batch's replay fits")
        check(tried <= 2 * (truth.bit_length() + 1), "%d replays for batch %d" % (tried, truth))
        b1, res1, _ = fit.search(model, 8 << 20, VRAM)
        check(b1 == 0 and res1["oom"], "a capacity below batch 1: batch 0")
        bmax, _, _ = fit.search(model, capacity, VRAM, max_batch=3)
        check(bmax == 3, "max_batch bounds the search")

        # refused: another shape, a size off the linear rule, one trace
        off = list(events_of(program(3), tmp, "b3.trace"))
        k = next(i for i, e in enumerate(off) if e[0] == "a" and e[2] == 262144 * 3)
        off[k] = off[k][:2] + (off[k][2] + 512,) + off[k][3:]
        for name, bad, why in [
            ("events", {2: traces[2], 4: events_of(program(4, layers=7), tmp, "l7.trace")}, "events"),
            ("nonlinear", {2: traces[2], 3: off, 4: traces[4]}, "linear"),
            ("one", {2: traces[2]}, "two or three"),
        ]:
            try:
                fit.learn(bad)
                check(False, "%s: refused" % name)
            except fit.FitError as e:
                check(why in str(e), "%s: refused: %s" % (name, e))

        # the command line
        cmd = [sys.executable, "-m", "vram_torch", "fit", "--vram", VRAM, "--capacity", "160MiB", "--json",
               "2=" + os.path.join(tmp, "b2.trace"), "4=" + os.path.join(tmp, "b4.trace")]
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        check(p.returncode == 0 and '"batch": %d' % truth in p.stdout, "command line: %s %s" % (p.stdout.strip(),
                                                                                             p.stderr.strip()))
        p = subprocess.run(cmd[:-2] + ["2=" + os.path.join(tmp, "missing.trace"), "4=x"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env)
        check(p.returncode == 2 and p.stderr.count("\n") == 1 and "missing.trace" in p.stderr,
              "a missing trace: status 2, one line: %s" % p.stderr.strip())
        p = subprocess.run(cmd[:7] + ["8MiB"] + cmd[8:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env)
        check(p.returncode == 1 and "batch 1 does not fit" in p.stderr, "batch 1 does not fit: status 1")
        bad_size = subprocess.run(cmd[:7] + ["lots"] + cmd[8:], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env)
        check(bad_size.returncode == 2 and "not a size" in bad_size.stderr, "a bad --capacity: status 2")
    print("%d failed" % len(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

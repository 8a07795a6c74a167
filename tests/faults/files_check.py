"""files_check.py — inputs that change or block underneath vram, and the small findings of issue 41.

    files_check.py VRAM FAKE_NVML_LIB CORPUS

- A FIFO as a trace, a corpus or VRAM_NVML_LIBRARY: a clear message and status 2, never a hang
  (a trace FIFO is given 10 s for its first byte, so a pipe from a starting program still works).
- A corpus truncated while `vram train` runs: training goes on from its copy, no SIGBUS.
- `--capacity "10GiB "` (a blank after the unit) is 10 GiB, as " 10GiB" is; `--device sim:`
  (nothing after the colon) is refused; gzip data inflating past VRAM_TRACE_MAX_BYTES is
  refused at the limit; `vram smi`'s table shows a used memory near 2^64 as the CSV does.
"""
import gzip
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pycheck import check, done, run, script_args  # noqa: E402

SMALL_TRACE = "# memtrace v1\na 1 4096 0\na 2 1048576 0\nf 1\nf 2\n"


def timed(cmd, env=None, timeout=60):
    t0 = time.monotonic()
    r = run(cmd, env=env, timeout=timeout)
    return r, time.monotonic() - t0


def fifo_checks(vram, nvml, tmp):
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    results = {}

    def go(name, cmd, env=None):
        results[name] = timed(cmd, env)

    env = dict(os.environ, VRAM_NVML_LIBRARY=fifo)
    jobs = [threading.Thread(target=go, args=("trace", [vram, "replay", fifo])),
            threading.Thread(target=go, args=("corpus", [vram, "train", "--data", fifo, "--steps", "1"])),
            threading.Thread(target=go, args=("nvml", [vram, "smi"], env))]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join()
    r, dt = results["trace"]
    check(r.returncode == 2 and "is a FIFO that nothing was written to in 10 s" in r.stderr and dt < 20,
          "a FIFO nobody writes to as a trace: status %d in %.1f s: %r" % (r.returncode, dt, r.stderr))
    r, dt = results["corpus"]
    check(r.returncode == 2 and "is a FIFO, not a regular file" in r.stderr and dt < 5,
          "a FIFO as the corpus: status %d in %.1f s: %r" % (r.returncode, dt, r.stderr))
    r, dt = results["nvml"]
    check(r.returncode == 2 and "VRAM_NVML_LIBRARY=%s is a FIFO, not a regular file" % fifo in r.stderr and dt < 5,
          "a FIFO as VRAM_NVML_LIBRARY: status %d in %.1f s: %r" % (r.returncode, dt, r.stderr))

    # a FIFO whose writer comes a moment later (as `vram replay <(zcat t.gz)` does) is read
    def writer():
        time.sleep(0.5)
        with open(fifo, "w") as f:
            f.write(SMALL_TRACE)

    w = threading.Thread(target=writer)
    w.start()
    r, dt = timed([vram, "replay", fifo])
    w.join()
    check(r.returncode == 0 and "2 allocations" in r.stdout, "a FIFO with a writer is read: %d %r" % (r.returncode, r.stderr))


def truncated_corpus(vram, corpus, tmp):
    copy = os.path.join(tmp, "corpus.txt")
    with open(corpus, "rb") as src, open(copy, "wb") as dst:
        dst.write(src.read())
    p = subprocess.Popen([vram, "train", "--data", copy, "--steps", "300", "--eval-every", "0", "--threads", "1",
                          "--layers", "1", "--width", "32", "--batch", "4"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()  # the model line: the corpus is open
    while first and not first.startswith("training:"):
        first = p.stdout.readline()
    time.sleep(0.2)
    running = p.poll() is None
    os.truncate(copy, 0)  # every page of a mapping of it is gone now
    try:
        out, err = p.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    check(running, "the training was still running when its corpus was truncated")
    check(p.returncode == 0 and "final train loss" in out,
          "training goes on after its corpus is truncated: status %d, %r" % (p.returncode, err[-300:]))


def small_findings(vram, nvml, tmp):
    trace = os.path.join(tmp, "small.trace")
    with open(trace, "w") as f:
        f.write(SMALL_TRACE)
    for cap in ["10GiB ", " 10GiB", "10GiB\t"]:
        r = run([vram, "replay", "--json", "--capacity", cap, trace])
        check(r.returncode == 0 and '"capacity_bytes": 10737418240' in r.stdout,
              "--capacity %r is 10 GiB: %d %r" % (cap, r.returncode, r.stderr))
    for dev in ["sim:", "cudasim:", "host:"]:
        r = run([vram, "replay", "--device", dev, trace])
        check(r.returncode == 2 and "nothing after ':'" in r.stderr and r.stdout == "",
              "--device %s refused: %d %r" % (dev, r.returncode, r.stderr))
    # gzip data inflating to 64 MiB of comment lines, against a limit of 16 MiB
    bomb = os.path.join(tmp, "bomb.trace.gz")
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b"# memtrace v1\n")
        line = b"# " + b"x" * 1021 + b"\n"
        for _ in range(64):
            f.write(line * 1024)
    env = dict(os.environ, VRAM_TRACE_MAX_BYTES="16MiB")
    r, dt = timed([vram, "replay", bomb], env)
    check(r.returncode == 2 and "more than 16777216 bytes of trace text" in r.stderr and "VRAM_TRACE_MAX_BYTES" in r.stderr,
          "gzip inflating past VRAM_TRACE_MAX_BYTES is refused: %d in %.1f s %r" % (r.returncode, dt, r.stderr))
    r = run([vram, "replay", bomb])  # 64 MiB of comments is under the default limit: a trace of no events
    check(r.returncode == 0 and "0 allocations" in r.stdout, "under the default limit it is read: %r" % r.stderr)
    r = run([vram, "replay", trace], env=dict(os.environ, VRAM_TRACE_MAX_BYTES="lots"))
    check(r.returncode == 2 and "VRAM_TRACE_MAX_BYTES='lots'" in r.stderr, "a bad VRAM_TRACE_MAX_BYTES: %r" % r.stderr)
    # used memory 2^64 - 616 bytes: 2^44 MiB rounded up, in the table as in the CSV
    env = dict(os.environ, VRAM_NVML_LIBRARY=nvml, FAKE_NVML_GPUS="1",
               FAKE_NVML_MEM="0:18446744073709551615:0:18446744073709551000")
    table = run([vram, "smi"], env=env)
    csv = run([vram, "smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], env=env)
    check(table.returncode == 0 and csv.returncode == 0 and csv.stdout.strip() == "17592186044416" and
          "17592186044416 / " in table.stdout,
          "used memory near 2^64 in the table as in the CSV: %r / %r" % (table.stdout[-300:], csv.stdout))


def main():
    vram, nvml, corpus = script_args(3, __doc__)
    with tempfile.TemporaryDirectory() as tmp:
        small_findings(vram, nvml, tmp)
        fifo_checks(vram, nvml, tmp)
        truncated_corpus(vram, corpus, tmp)
    return done("files_check")


if __name__ == "__main__":
    sys.exit(main())

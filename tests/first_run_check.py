#!/usr/bin/env python3
"""first_run_check.py — what a first run met (issue 40, section 5), each checked as a user meets it.

Runs the built `vram` the way the README's first commands do and checks: a partial trace is said
to be one and PyTorch's whole-run figures are not shown beside it; each geometric-mean row of the
closing table averages one set of traces; `vram train --report` gives the same memory figures on
every run of one command, whatever its threads' scheduling; `vram --version` and `-V`; a mistyped
command or flag gets the nearest name; sizes and counts read as English ("1 step", "1.00 MiB",
"0 bytes"); training progress is one line in place on a terminal and one line every N steps in a
log, evaluations kept; a CPU run's summary does not speak of CUDA; a binary file given as a trace
is named as such, not echoed; vram_torch.enable() without PyTorch says so plainly; the Makefile's quiet build shows warnings (CMake's and the
compiler's) and nothing else.

usage: first_run_check.py VRAM_BINARY SOURCE_DIR CORPUS
"""
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done, run, script_args  # noqa: E402

VRAM, SRC, CORPUS = script_args(3, __doc__)
TINY = ["--layers", "1", "--heads", "2", "--width", "32", "--context", "16", "--batch", "2", "--threads", "1"]


def vram(*args, stdin=None):
    """Text out for a command; bytes out for one given bytes in."""
    return run([VRAM, *args]) if stdin is None else \
        subprocess.run([VRAM, *args], input=stdin, capture_output=True, timeout=300)


def partial_trace(tmp):
    import gzip
    cut = os.path.join(tmp, "cut.trace")
    with gzip.open(os.path.join(SRC, "traces", "gpt2_train.trace.gz"), "rt") as f, open(cut, "w") as o:
        for i, line in enumerate(f):
            if i == 353:
                break
            o.write(line)
    r = vram("replay", cut)
    check(r.returncode == 0 and "partial trace" in r.stdout and "PyTorch native" not in r.stdout
          and "PyTorch expandable" not in r.stdout, "a partial trace is said, PyTorch's whole-run figures left out: "
          + r.stdout[-600:])
    check("partial trace" in r.stderr and r.stderr.count("\n") == 1, "one warning on stderr: %r" % r.stderr)
    r = vram("replay", "--json", cut)
    d = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
    check(d.get("partial") is True and "pytorch_native_peak_reserved_bytes" not in d
          and d.get("recorded_peak_requested_bytes") == 13594206920, "JSON: partial, no PyTorch figures: %r" % d)
    # a whole trace is not partial
    r = vram("replay", "--json", os.path.join(SRC, "traces", "gpt2_generate.trace.gz"))
    d = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
    check("partial" not in d and d.get("pytorch_native_peak_reserved_bytes", 0) > 0, "a whole trace keeps PyTorch's figures")


def geometric_means(tmp):
    with_pt = os.path.join(tmp, "with_pytorch.trace")
    without = os.path.join(tmp, "without.trace")
    with open(with_pt, "w") as f:
        f.write("# memtrace v1\n# peak_requested_bytes: 1000000\n# pytorch_native_peak_reserved_bytes: 2097152\n"
                "a 0 1000000 0\nf 0\n")
    with open(without, "w") as f:
        f.write("# memtrace v1\na 0 3000 0\nf 0\n")
    r = vram("replay", with_pt, without)
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line.split()}
    row = rows.get("with_pytorch", ["0"] * 7)
    ratio_with, native_with = float(row[5]), row[6]
    means = [line for line in r.stdout.splitlines() if line.startswith("geom")]
    same_set = True
    for line in means:
        label, figures = line[:20], line[20:].split()
        # a row that shows PyTorch's mean shows vram's over the same traces: only with_pytorch
        if len(figures) >= 2 and figures[1] != "-":
            same_set &= abs(float(figures[0]) - ratio_with) < 1e-3
    check(r.returncode == 0 and means and same_set and any(l[20:].split()[1:2] == [native_with] for l in means),
          "each mean row over one set of traces:\n" + r.stdout[-900:])


def report_reproducible():
    reports = []
    for _ in range(3):
        r = run([VRAM, "train", "--data", CORPUS, "--steps", "2", "--threads", "8", "--report"])
        text = r.stdout
        at = text.find("|====")
        reports.append(text[at:] if r.returncode == 0 and at >= 0 else "failed: " + r.stderr[-300:])
    check(reports[0].startswith("|") and reports[0] == reports[1] == reports[2],
          "train --report's memory figures the same on three runs at 8 threads:\n"
          + "\n".join(l for rep in reports for l in rep.splitlines() if "temporaries" in l or "Reserved memory " in l))


def version_and_typos():
    for flag in ("--version", "-V", "version"):
        r = vram(flag)
        check(r.returncode == 0 and re.fullmatch(r"vram \d+\.\d+\.\d+\n", r.stdout), f"vram {flag}: {r.stdout!r}")
    cases = [(["replya"], "vram: unknown command 'replya'; did you mean 'replay'?"),
             (["train", "--step", "3"], "vram train: unknown option '--step'; did you mean '--steps'?"),
             (["replay", "--fitt", "x"], "vram replay: unknown option '--fitt'; did you mean '--fit'?"),
             (["smi", "--jsn"], "vram smi: unknown option '--jsn'; did you mean '--json'?"),
             (["bench", "alloc", "--repat", "2"], "did you mean '--repeat'?"),
             (["--verison"], "did you mean '--version'?")]
    for args, want in cases:
        r = vram(*args)
        check(r.returncode == 2 and want in r.stderr and r.stderr.count("\n") == 1, f"{args}: {r.stderr!r}")
    r = vram("xyzzy")
    check(r.returncode == 2 and "unknown command 'xyzzy'" in r.stderr and "did you mean" not in r.stderr,
          f"no suggestion for a word unlike any: {r.stderr!r}")


def plurals_and_units(tmp):
    r = run([VRAM, "train", "--data", CORPUS, "--steps", "1", *TINY])
    check(r.returncode == 0 and "done: 1 step in" in r.stdout and "1 steps" not in r.stdout
          and "GPT 1 layer, 2 heads" in r.stdout, "one step, one layer: " + r.stdout[:400])
    r = vram("replay", "-", stdin=b"# memtrace v1\na 0 1048576 0\nf 0\n")
    check(r.returncode == 0 and "1.00 MiB" in r.stdout.decode() and "1024.00 KiB" not in r.stdout.decode(),
          "1 MiB is 1.00 MiB: " + r.stdout.decode()[:500])
    r = vram("replay", "-", stdin=b"# memtrace v1\na 0 0 0\nf 0\n")
    out = r.stdout.decode()
    check(r.returncode == 0 and re.search(r"peak requested +0 bytes\n", out) and "0.00 bytes" not in out,
          "nothing is 0 bytes: " + out[:500])
    r = vram("replay", "-", stdin=b"# memtrace v1\na 0 1 0\nf 0\n")
    check(r.returncode == 0 and re.search(r"peak requested +1 byte\n", r.stdout.decode()), "one byte")


def progress_in_a_log():
    r = run([VRAM, "train", "--data", CORPUS, "--steps", "40", "--eval-every", "20", "--eval-batches", "1", *TINY])
    steps = [l for l in r.stdout.splitlines() if l.startswith("step ")]
    evals = [l for l in r.stdout.splitlines() if l.startswith("eval step ")]
    check(r.returncode == 0 and len(steps) == 20 and steps[-1].startswith("step 40/40 | loss ")
          and re.search(r"\| \d+:\d\d left$", steps[-1]) and "\r" not in r.stdout,
          "in a log, a line every 2 of 40 steps, with the total and time left: %r" % steps[-3:])
    check(evals == [e for e in evals if "val loss" in e] and len(evals) == 2 and evals[0].startswith("eval step 20/40"),
          "evaluations kept: %r" % evals)
    r = run([VRAM, "train", "--data", CORPUS, "--steps", "6", "--log-every", "3", *TINY])
    steps = [l.split("|")[0].strip() for l in r.stdout.splitlines() if l.startswith("step ")]
    check(steps == ["step 3/6", "step 6/6"], "--log-every 3: %r" % steps)


def progress_on_a_terminal():
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(VRAM, [VRAM, "train", "--data", CORPUS, "--steps", "4", "--eval-every", "2", "--eval-batches", "1",
                        *TINY])
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace").replace("\r\n", "\n")
    lines = text.split("\n")
    step_lines = [l for l in lines if "step 4/4" in l and not l.startswith("eval")]
    check(os.WEXITSTATUS(status) == 0 and text.count("\r\x1b[K") >= 4, "on a terminal the step line is redrawn: %r"
          % text[-400:])
    check(any(l.startswith("eval step 2/4 | val loss") for l in (x.split("\r\x1b[K")[-1] for x in lines)),
          "an evaluation stays on its own line: %r" % lines)
    check(len(step_lines) == 1, "the last step's line stays once the run ends: %r" % lines[-6:])


def cpu_summary_words():
    r = run([VRAM, "train", "--data", CORPUS, "--steps", "1", "--report", *TINY])
    check(r.returncode == 0 and "| Reserved memory       |" in r.stdout and "CUDA" not in r.stdout
          and "cudaMalloc" not in r.stdout and "GPU" not in r.stdout,
          "a CPU run's summary names host memory for what it is: " + r.stdout[-2500:])


def binary_header(tmp):
    path = os.path.join(tmp, "binary.trace")
    with open(path, "wb") as f:
        f.write(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x03\x00>\x00\x01\x00\n" + bytes(range(256)) + b"\n")
    r = vram("replay", path, stdin=b"")
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2 and "binary data, not text" in err and "ELF" not in err and "??" not in err
          and err.count("\n") == 1, "a binary file is named as one, not echoed: %r" % err)


def enable_without_torch():
    """vram_torch.enable() where PyTorch cannot be imported: one clear exception, no chained
    ModuleNotFoundError (a raw traceback), and the package itself imports."""
    code = ("import sys; sys.modules['torch'] = None\n"  # (importing torch then fails, as where it is not installed)
            "import vram_torch\n"
            "try:\n    vram_torch.enable()\n"
            "except ImportError as e:\n"
            "    print(type(e).__name__, e.__cause__ is None, e.__suppress_context__, str(e))\n")
    r = run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=os.path.join(SRC, "python")))
    check(r.returncode == 0 and r.stdout.startswith("TorchMissingError True True vram_torch.enable() needs PyTorch")
          and "Install PyTorch" in r.stdout, "enable() without PyTorch: %r %r" % (r.stdout, r.stderr[-300:]))
    r = run([sys.executable, "-c", "import sys; sys.modules['torch'] = None\nimport vram_torch\nvram_torch.enable()"],
            env=dict(os.environ, PYTHONPATH=os.path.join(SRC, "python")))
    check(r.returncode == 1 and "During handling" not in r.stderr and "needs PyTorch" in r.stderr.splitlines()[-1],
          "uncaught, the last line says it and no second traceback: %r" % r.stderr[-600:])


def quiet_build(tmp):
    """The Makefile's build recipe over a small project of the same kind: CMake's note and warning
    and the compiler's warning show; the status lines, per-file progress, 'Built target' and
    'Entering directory' lines do not."""
    fixture = os.path.join(tmp, "fixture")
    os.makedirs(fixture)
    with open(os.path.join(fixture, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.20)\nproject(q C)\nmessage(STATUS \"a status line\")\n"
                "message(NOTICE \"a notice line\")\nmessage(WARNING \"a cmake warning\")\n"
                "add_compile_options(-Wall)\nadd_executable(q q.c)\nadd_executable(r r.c)\n")
    for name in ("q", "r"):
        with open(os.path.join(fixture, name + ".c"), "w") as f:
            f.write("int main(void) { int unused_%s; return 0; }\n" % name)
    r = run(["make", "-f", os.path.join(SRC, "Makefile"), "build", "SRC=" + fixture,
             "BUILD=" + os.path.join(tmp, "b"), "JOBS=2"], cwd=tmp)
    out = r.stdout + r.stderr
    check(r.returncode == 0 and "a notice line" in out and "a cmake warning" in out and "unused_q" in out
          and "unused_r" in out, "the quiet build shows CMake's and the compiler's warnings: " + out[-1500:])
    check("a status line" not in out and "Entering directory" not in out and "Building C object" not in out
          and "Built target" not in out and "%]" not in out, "and nothing else: " + out[-1500:])
    # a failing build fails
    with open(os.path.join(fixture, "r.c"), "w") as f:
        f.write("int main(void) { return undeclared; }\n")
    r = run(["make", "-f", os.path.join(SRC, "Makefile"), "build", "SRC=" + fixture,
             "BUILD=" + os.path.join(tmp, "b"), "JOBS=2"], cwd=tmp)
    check(r.returncode != 0 and "undeclared" in r.stdout + r.stderr, "a compile error fails the build and shows")


with tempfile.TemporaryDirectory() as tmp:
    partial_trace(tmp)
    geometric_means(tmp)
    version_and_typos()
    plurals_and_units(tmp)
    progress_in_a_log()
    progress_on_a_terminal()
    cpu_summary_words()
    binary_header(tmp)
    enable_without_torch()
    quiet_build(tmp)
    report_reproducible()
sys.exit(done("first_run_check"))

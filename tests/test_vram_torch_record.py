"""test_vram_torch_record.py — the memtrace v1 converter behind `python -m vram_torch record`,
on PyTorch-shaped trace entries (no torch needed): dense ids, requested sizes, streams numbered
in order of first use, frees of allocations made before recording skipped, the peak of live
requested bytes, free_completed used only where free_requested is absent, marks (comment
lines) before the entries they name, and blocks live before the entries written first; then the command itself on a stand-in torch: the program's
arguments and exit status, the trace of a program that failed named partial, -o kept where it
was given when the program changes folder, one file per rank under torchrun, and a trace also
from a program that ends by os._exit() or SIGTERM (but none from the processes it forks), and an
earlier trace kept whole by a write that fails part-way."""
import io
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from vram_torch.record import convert  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

tr = [
    {"action": "free_requested", "addr": 5},  # allocated before recording
    {"action": "alloc", "addr": 100, "size": 1000, "stream": 0},
    {"action": "alloc", "addr": 200, "size": 50, "stream": 777},
    {"action": "segment_alloc", "addr": 0, "size": 2 << 20, "stream": 0},
    {"action": "free_requested", "addr": 100},
    {"action": "free_completed", "addr": 100},
    {"action": "alloc", "addr": 100, "size": 10, "stream": 555},
    {"action": "alloc", "addr": 300, "size": 7, "stream": 777},
]
out = io.StringIO()
n, peak, skipped = convert(tr, out, {"source": "test"})
lines = out.getvalue().splitlines()
check(lines[0] == "# memtrace v1", lines[0])
check("# source: test" in lines, "source kept")
check("# peak_requested_bytes: 1050" in lines, "peak 1050: %s" % lines)
body = [l for l in lines if not l.startswith("#")]
check(body == ["a 0 1000 0", "a 1 50 1", "f 0", "a 2 10 2", "a 3 7 1"], "records: %s" % body)
check((n, peak, skipped) == (4, 1050, 1), "counts %s" % ((n, peak, skipped),))

out = io.StringIO()
convert(tr, out, {}, marks={4: ["# sync: first step 0", "# workload: second"], 0: ["# workload: first"]})
body = [l for l in out.getvalue().splitlines() if l.startswith(("# workload", "# sync")) or not l.startswith("#")]
check(body == ["# workload: first", "a 0 1000 0", "a 1 50 1", "# sync: first step 0", "# workload: second", "f 0",
               "a 2 10 2", "a 3 7 1"], "marks before their entries: %s" % body)

# Blocks live before the entries begin (what an earlier workload left: cuBLAS's workspaces) come
# first, count in the peak, and their frees are no longer skipped.
out = io.StringIO()
n, peak, skipped = convert(tr, out, {}, live_at_start=[(5, 4096, 0), (9, 64, 777)])
lines = out.getvalue().splitlines()
body = [l for l in lines if not l.startswith("#")]
check(body == ["a 0 4096 0", "a 1 64 1", "f 0", "a 2 1000 0", "a 3 50 1", "f 2", "a 4 10 2", "a 5 7 1"],
      "live blocks first, their free kept: %s" % body)
check((n, peak, skipped) == (6, 4160, 0) and "# peak_requested_bytes: 4160" in lines,
      "live blocks in the counts and the peak: %s" % ((n, peak, skipped),))

old = [{"action": "alloc", "addr": 1, "size": 512, "stream": 0}, {"action": "free_completed", "addr": 1}]
out = io.StringIO()
convert(old, out, {})
check([l for l in out.getvalue().splitlines() if not l.startswith("#")] == ["a 0 512 0", "f 0"], "free_completed fallback")
# The command checks what it writes before the program runs, not after (no torch needed).
import tempfile  # noqa: E402
from vram_torch.record import record  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    prog, marker = os.path.join(tmp, "prog.py"), os.path.join(tmp, "ran")
    with open(prog, "w") as f:
        f.write("open(%r, 'w').close()\n" % marker)
    for out_path, max_entries, want in ((os.path.join(tmp, "no", "x.trace"), 100, "no such folder"),
                                        (tmp, 100, "is a folder"), (os.path.join(tmp, "new") + os.sep, 100, "names a folder"),
                                        ("", 100, "output file is needed"),
                                        (os.path.join(tmp, "x.trace"), 0, "--max-entries")):
        try:
            record(out_path, [prog], None, max_entries)
            check(False, "record -o %r --max-entries %d must fail" % (out_path, max_entries))
        except SystemExit as e:
            check(want in str(e) and e.code == 2 and not os.path.exists(marker),
                  "refused (status %r) before the program ran: %s" % (e.code, e))
# The command end to end on a stand-in torch (the names record.py uses): the program runs as
# __main__ with its arguments as given ("--" too), its exit status comes back, and a program that
# fails still gets its trace, named partial in the header and in the line the command prints.
import types  # noqa: E402
from contextlib import redirect_stderr  # noqa: E402
from vram_torch.__main__ import main  # noqa: E402

memory = types.SimpleNamespace(_record_memory_history=lambda *a, **k: None,
                               _snapshot=lambda: {"device_traces": [[{"action": "alloc", "addr": 1, "size": 512}]]})
sys.modules["torch"] = types.SimpleNamespace(
    __version__="2.11.0", version=types.SimpleNamespace(cuda="12.8"),
    cuda=types.SimpleNamespace(memory=memory, device_count=lambda: 1, get_device_name=lambda d: "stand-in",
                               max_memory_allocated=lambda d: 512, max_memory_reserved=lambda d: 2 << 20))
with tempfile.TemporaryDirectory() as tmp:
    prog, seen, out = os.path.join(tmp, "prog.py"), os.path.join(tmp, "seen"), os.path.join(tmp, "run.trace")
    with open(prog, "w") as f:
        f.write("import sys\n"
                "open(%r, 'w').write(repr((__name__, sys.argv)))\n"
                "if sys.argv[-1] == 'raise':\n"
                "    raise ValueError('boom')\n"
                "sys.exit(int(sys.argv[-1]))\n" % seen)
    for args, status, ended in ((["--", "0"], 0, None), (["3"], 3, "exited with status 3"),
                                (["raise"], None, "raised ValueError")):
        err = io.StringIO()
        try:
            with redirect_stderr(err):
                got = main(["record", "-o", out, prog] + args)
        except ValueError:
            got = None
        name, argv = eval(open(seen).read())
        lines = open(out).read().splitlines()
        check(got == status and name == "__main__" and argv == [prog] + args,
              "record %s: status %r, the program saw %r %r" % (args, got, name, argv))
        partial = [line for line in lines if line.startswith("# partial:")]
        check("a 0 512 0" in lines and (partial == ["# partial: the program %s; the trace stops where it did" % ended]
                                        if ended else not partial),
              "record %s: the trace, %s: %s" % (args, "named partial" if ended else "whole", partial))
        check(("partial trace" in err.getvalue()) == bool(ended), "record %s says so: %r" % (args, err.getvalue()))
    # -o relative to the folder the command started in, also when the program changes folder
    os.mkdir(os.path.join(tmp, "sub"))
    with open(prog, "w") as f:
        f.write("import os\nos.chdir('sub')\n")
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        with redirect_stderr(io.StringIO()):
            main(["record", "-o", "rel.trace", prog])
    finally:
        os.chdir(cwd)
    check(os.path.exists(os.path.join(tmp, "rel.trace")) and not os.path.exists(os.path.join(tmp, "sub", "rel.trace")),
          "-o rel.trace lands where it was given, not in the folder the program moved to")
    # A trace that cannot be read or written at the end says so, and does not replace the program's
    # own exception (nor its success: then the status is 1)
    def broken_snapshot():
        raise RuntimeError("CUDA context broken")
    memory._snapshot, good_snapshot = broken_snapshot, memory._snapshot
    with open(prog, "w") as f:
        f.write("import sys\nif sys.argv[-1] == 'raise':\n    raise KeyError('mine')\n")
    for arg, want in (("raise", KeyError), ("ok", 1)):
        err = io.StringIO()
        try:
            with redirect_stderr(err):
                got = main(["record", "-o", os.path.join(tmp, "lost.trace"), prog, arg])
        except KeyError as e:
            got = type(e)
        check(got == want and "no trace written" in err.getvalue() and "CUDA context broken" in err.getvalue(),
              "record %s with a failing snapshot: %r, %r" % (arg, got, err.getvalue()))
    # ...and a trace whose writing fails part-way leaves the earlier trace of that name whole (a
    # malformed entry here; a full disk or SIGKILL alike), with no temporary file left beside it
    kept = os.path.join(tmp, "kept.trace")
    with open(kept, "w") as f:
        f.write("# memtrace v1\na 0 512 0\n")
    memory._snapshot = lambda: {"device_traces": [[{"action": "alloc", "addr": 1, "size": 512}, {"action": "alloc"}]]}
    with redirect_stderr(io.StringIO()) as err:
        got = main(["record", "-o", kept, prog, "ok"])
    check(got == 1 and open(kept).read() == "# memtrace v1\na 0 512 0\n" and os.listdir(tmp).count("kept.trace") == 1
          and not [n for n in os.listdir(tmp) if n.endswith(".tmp")],
          "a failed write keeps the earlier trace: %r, %r, %s" % (got, open(kept).read(), os.listdir(tmp)))
    memory._snapshot = good_snapshot
    # where the trace cannot be replaced by rename (another user's file in a sticky folder such as
    # /tmp: EPERM), it is written in place, whole
    real_replace = os.replace

    def refused(src, dst):
        raise PermissionError(1, "Operation not permitted")
    os.replace = refused
    try:
        with redirect_stderr(io.StringIO()):
            got = main(["record", "-o", kept, prog, "ok"])
    finally:
        os.replace = real_replace
    check(got == 0 and "a 0 512 0" in open(kept).read().splitlines() and "# source:" in open(kept).read()
          and not [n for n in os.listdir(tmp) if n.endswith(".tmp")],
          "a trace that cannot be renamed into place is written in place: %r %s" % (got, os.listdir(tmp)))
    # Under torchrun every rank gets the same -o: each writes its own file
    with open(prog, "w") as f:
        f.write("pass\n")
    for rank, given, want in (("1", "ddp.trace", "ddp.rank1.trace"), ("0", "r{rank}.trace", "r0.trace")):
        os.environ.update(RANK=rank, WORLD_SIZE="2")
        try:
            with redirect_stderr(io.StringIO()):
                main(["record", "-o", os.path.join(tmp, given), prog])
        finally:
            del os.environ["RANK"], os.environ["WORLD_SIZE"]
        check(os.path.exists(os.path.join(tmp, want)) and not os.path.exists(os.path.join(tmp, given)),
              "rank %s of 2, -o %s: written to %s" % (rank, given, want))
        source = [line for line in open(os.path.join(tmp, want)) if line.startswith("# source:")]
        check(source and ("rank %s of 2" % rank) in source[0], "the header names the rank: %s" % source)
    # The ends that run no `finally`, in a process of their own: os._exit() writes the trace
    # first (partial unless the status is 0) and keeps its status; SIGTERM writes a partial trace
    # and the process still dies by SIGTERM; a process the program forks exits and dies as it
    # would without record, writing nothing (the stand-in snapshot logs which process reads it).
    import signal  # noqa: E402
    import subprocess  # noqa: E402
    driver, log = os.path.join(tmp, "driver.py"), os.path.join(tmp, "snapshots")
    with open(driver, "w") as f:
        f.write("import os, sys, types\n"
                "sys.path.insert(0, %r)\n"
                "def snapshot():\n"
                "    open(%r, 'a').write('%%d\\n' %% os.getpid())\n"
                "    return {'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 512}]]}\n"
                "memory = types.SimpleNamespace(_record_memory_history=lambda *a, **k: None, _snapshot=snapshot)\n"
                "sys.modules['torch'] = types.SimpleNamespace(__version__='2.11.0', version=types.SimpleNamespace(cuda='12.8'),\n"
                "    cuda=types.SimpleNamespace(memory=memory, device_count=lambda: 1, get_device_name=lambda d: 'stand-in',\n"
                "                               max_memory_allocated=lambda d: 512, max_memory_reserved=lambda d: 2 << 20))\n"
                "from vram_torch.__main__ import main\n"
                "sys.exit(main(sys.argv[1:]))\n"
                % (os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"), log))
    child_exit = ("import os, sys\npid = os.fork()\nif pid == 0:\n    os._exit(4)\n"
                  "_, st = os.waitpid(pid, 0)\nsys.exit(0 if os.WEXITSTATUS(st) == 4 else 9)\n")
    child_term = ("import os, signal, sys, time\npid = os.fork()\nif pid == 0:\n    os.kill(os.getpid(), signal.SIGTERM)\n"
                  "    time.sleep(5)\n    os._exit(8)\n"
                  "_, st = os.waitpid(pid, 0)\nsys.exit(0 if os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGTERM else 9)\n")
    term = "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(5)\nprint('not stopped')\n"
    for name, body, status, ended in (
            ("os._exit(0)", "import os\nos._exit(0)\n", 0, None),
            ("os._exit(7)", "import os\nos._exit(7)\n", 7, "called os._exit(7)"),
            ("SIGTERM", term, -signal.SIGTERM, "was stopped by SIGTERM"),
            ("a forked child's os._exit(4)", child_exit, 0, None),
            ("a forked child's SIGTERM", child_term, 0, None)):
        with open(prog, "w") as f:
            f.write(body)
        for path in (out, log):
            if os.path.exists(path):
                os.remove(path)
        r = subprocess.run([sys.executable, driver, "record", "-o", out, prog], capture_output=True, text=True, timeout=60)
        lines = open(out).read().splitlines() if os.path.exists(out) else []
        readers = open(log).read().split() if os.path.exists(log) else []
        partial = [line for line in lines if line.startswith("# partial:")]
        check(r.returncode == status and "a 0 512 0" in lines and len(readers) == 1 and "not stopped" not in r.stdout
              and (partial == ["# partial: the program %s; the trace stops where it did" % ended] if ended else not partial),
              "record, a program that ends by %s: status %d (want %d), trace %s, read by %d process(es): %r"
              % (name, r.returncode, status, partial or "whole", len(readers), r.stderr[-300:]))
sys.exit(done("test_vram_torch_record"))

"""test_vram_torch_launch.py — the `python -m vram_torch` commands' launcher without PyTorch: a
program runs as __main__ with its own argv and its directory first on sys.path, its exit status
comes back (sys.exit(3), sys.exit("message"), a normal end), sys.argv and sys.path are restored;
a missing script or command is a clear message and status 2 (bad input or usage, as vram's own
tools), --version with no library says why (status 1), and so are a missing PyTorch and a failing vram_torch.enable() (status 1: the machine,
not the input); and run_to_the_end calls its finish once however the program ends (os._exit() and
SIGTERM too)."""
import io
import os
import re
import sys
import tempfile
from contextlib import redirect_stderr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from vram_torch.__main__ import main  # noqa: E402
from vram_torch.launch import check_script, run_script  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    script = os.path.join(tmp, "prog.py")
    seen = os.path.join(tmp, "seen.txt")
    with open(script, "w") as f:
        f.write("import sys\n"
                "open(%r, 'w').write(repr((__name__, sys.argv, sys.path[0])))\n"
                "code = sys.argv[1]\n"
                "sys.exit(int(code) if code.isdigit() else (None if code == 'none' else code))\n" % seen)
    argv_before, path_before = list(sys.argv), list(sys.path)
    status = run_script([script, "3", "--flag"])
    name, argv, path0 = eval(open(seen).read())
    check(status == 3, "sys.exit(3) comes back as 3: %r" % status)
    check(name == "__main__" and argv == [script, "3", "--flag"], "runs as __main__ with its argv: %r %r" % (name, argv))
    check(path0 == tmp, "its directory first on sys.path: %r" % path0)
    check(sys.argv == argv_before and sys.path == path_before, "sys.argv and sys.path restored")
    err = io.StringIO()
    with redirect_stderr(err):
        check(run_script([script, "bad input"]) == 1, "sys.exit('message') is status 1")
    check(err.getvalue() == "bad input\n", "and its message is printed: %r" % err.getvalue())
    check(run_script([script, "none"]) == 0, "sys.exit() is status 0")
    try:
        check_script("run", [os.path.join(tmp, "missing.py")])
        check(False, "a missing script is refused")
    except SystemExit as e:
        check("no such script" in str(e) and "missing.py" in str(e), "names the missing script: %s" % e)
    try:
        check_script("run", [tmp])  # python runs a folder's __main__.py; this one has none
        check(False, "a folder without __main__.py is refused")
    except SystemExit as e:
        check("folder without __main__.py" in str(e) and e.code == 2, "says the folder has no __main__.py: %s" % e)
    try:
        check_script("run", [])
        check(False, "no script is refused")
    except SystemExit as e:
        check("no script given" in str(e), "says no script was given: %s" % e)
    err = io.StringIO()
    with redirect_stderr(err):
        check(main([]) == 2 and main(["launch"]) == 2, "no or an unknown command: status 2")
    check("vram_torch run" in err.getvalue() and "vram_torch record" in err.getvalue(), "usage names both commands")
    err = io.StringIO()
    with redirect_stderr(err):
        status = main(["run", os.path.join(tmp, "missing.py")])
    check(status == 2 and "vram_torch run: no such script" in err.getvalue() and len(err.getvalue().splitlines()) == 1,
          "run of a missing script: one line naming it, status 2 (bad input, as vram's tools): %d %r"
          % (status, err.getvalue()))
    # without PyTorch (hidden here, so that the check holds where torch is installed too): one
    # line saying it is needed, status 1, no traceback
    import subprocess  # noqa: E402
    python_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
    for command in (["run", script, "0"], ["record", "-o", os.path.join(tmp, "x.trace"), script, "0"]):
        r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['torch'] = None; "
                            "from vram_torch.__main__ import main; sys.exit(main(sys.argv[1:]))"] + command,
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=python_dir))
        check(r.returncode == 1 and "PyTorch is needed" in r.stderr and "Traceback" not in r.stderr
              and len(r.stderr.strip().splitlines()) == 1, "%s without PyTorch: %d %r" % (command[0], r.returncode, r.stderr))
    # --version: the package's version, then the library's; with no library that loads, the
    # reason and status 1 (the library found and loaded: tests/pip_check.py)
    missing = os.path.join(tmp, "no", "libvram_torch.so")
    r = subprocess.run([sys.executable, "-m", "vram_torch", "--version"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=python_dir, VRAM_TORCH_LIBRARY=missing))
    check(r.returncode == 1 and re.match(r"vram_torch \d+\.\d+\.\d+ \(", r.stdout) and missing in r.stderr
          and "no such file" in r.stderr and "Traceback" not in r.stderr,
          "--version without a library: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    # run when vram cannot be PyTorch's allocator (here: no libvram_torch.so): one line, status 1
    r = subprocess.run([sys.executable, "-c", "import sys, types; sys.modules['torch'] = types.ModuleType('torch'); "
                        "from vram_torch.__main__ import main; sys.exit(main(sys.argv[1:]))", "run", script, "0"],
                       capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=python_dir, VRAM_TORCH_LIBRARY=os.path.join(tmp, "none.so")))
    check(r.returncode == 1 and r.stderr.startswith("vram_torch run: ") and "none.so: no such file" in r.stderr
          and len(r.stderr.strip().splitlines()) == 1, "run without its library: %d %r" % (r.returncode, r.stderr))
    # run_to_the_end (record's trace, run --summary): finish once, told how the program ended,
    # also by os._exit() and SIGTERM; a finish that fails turns a good end into status 1, not a
    # failed one's status
    driver = os.path.join(tmp, "driver.py")
    with open(driver, "w") as f:
        f.write("import sys\nsys.path.insert(0, %r)\nfrom vram_torch.launch import run_to_the_end\n"
                "import os, signal, time\nworks, mode = sys.argv[1] in ('ok', 'term', 'nofd'), sys.argv[1]\n"
                "if mode == 'nofd':  # one file descriptor left: enough to open the script, not for a pipe\n"
                "    import resource\n    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
                "    fds = []\n    try:\n        while True:\n            fds.append(os.open(os.devnull, os.O_RDONLY))\n"
                "    except OSError:\n        os.close(fds.pop())\n"
                "def finish(failed):\n    print('finish:', failed, flush=True)\n"
                "    if mode == 'term':  # SIGTERM while finish runs: it runs to its end, then the process ends\n"
                "        os.kill(os.getpid(), signal.SIGTERM)\n        time.sleep(0.5)\n        print('finished', flush=True)\n"
                "    return works\n"
                "sys.exit(run_to_the_end(sys.argv[2:], finish))\n" % python_dir)
    stop = "finish: was stopped by SIGTERM"
    for body, works, status, lines in (
            ("pass", "ok", 0, ["finish: None"]), ("pass", "fails", 1, ["finish: None"]),
            ("import sys; sys.exit(3)", "fails", 3, ["finish: exited with status 3"]),
            ("import os; os._exit(0)", "ok", 0, ["finish: None"]), ("import os; os._exit(0)", "fails", 1, ["finish: None"]),
            ("import os; os._exit(6)", "fails", 6, ["finish: called os._exit(6)"]),
            ("import os, signal, time; os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)", "ok", -15, [stop]),
            # SIGTERM while the main thread waits in C with the GIL released, where no Python handler
            # runs (as a rank in a CUDA or NCCL wait): a mutex locked twice waits for good
            ("import ctypes, os, signal, threading\nlibc = ctypes.CDLL(None)\nm = ctypes.create_string_buffer(64)\n"
             "libc.pthread_mutex_lock(m)\nthreading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
             "libc.pthread_mutex_lock(m)", "ok", -15, [stop]),
            # SIGTERM while finish runs: finish runs to its end, then the process ends by the signal
            ("pass", "term", -15, ["finish: None", "finished"]),
            # no file descriptors left for the watcher's pipe: the program still runs, finish still comes
            ("pass", "nofd", 0, ["finish: None"]),
            # a program with a SIGTERM handler of its own (a checkpoint on preemption) keeps it
            ("import os, signal, time\nsignal.signal(signal.SIGTERM, lambda s, f: print('own handler', flush=True))\n"
             "os.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(0.5)", "ok", 0, ["own handler", "finish: None"])):
        with open(script, "w") as f:
            f.write(body + "\n")
        try:
            r = subprocess.run([sys.executable, driver, works, script], capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired as e:
            r = subprocess.CompletedProcess(e.cmd, "hung", e.stdout or "", e.stderr or "")
        check(r.returncode == status and r.stdout.splitlines() == lines,
              "run_to_the_end, %r, finish %s: status %s, %r" % (body, works, r.returncode, r.stdout))
sys.exit(done("test_vram_torch_launch"))

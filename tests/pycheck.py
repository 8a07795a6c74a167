"""pycheck.py — the check() the standalone Python tests share (CTest runs each as a script), and
the one helper of those that drive libvram_torch.so through ctypes.

    sys.path.insert(0, <this directory>); from pycheck import check, done
    check(cond, "what should hold")   # counts; prints "FAIL: what" on stderr when cond is false
    sys.exit(done("test_name"))       # prints "test_name: N passed, M failed"; 1 if any failed
    take_string(lib, ptr)             # a string the plug-in malloc'd, decoded and freed (None for NULL)
    lib, fake = plugin_over_fake_driver(n)   # libvram_torch.so over the fake driver (a test's start)
    run(cmd, **kw)                    # subprocess.run, output captured as text; a command that
                                      # cannot start or times out is a result with status 127
    check_installed_vram(how, vram, version, trace, cwd)   # an installed `vram` works on its own
    a, b = script_args(2, __doc__, unsanitized="why")   # the arguments, or usage; SKIP (77) in the
                                                      # sanitizer build, for that reason
"""
import os
import subprocess
import sys

passed = 0
failed = 0


def check(cond, what):
    """Counts one check; prints what failed. Returns cond, so a test can branch on it."""
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)
    return cond


def done(name):
    """Prints the tally and returns the exit status: 1 if any check failed, else 0."""
    print("%s: %d passed, %d failed" % (name, passed, failed))
    return 1 if failed else 0


def script_args(count, usage, unsanitized=None):
    """sys.argv[1:] when it holds `count` arguments, else exits with `usage`. With `unsanitized` (the
    reason), a run in the sanitizer build (VRAM_TEST_SANITIZED) prints "SKIP: reason" and exits
    77, which CTest reports as skipped."""
    if len(sys.argv) != count + 1:
        sys.exit(usage)
    if unsanitized and os.environ.get("VRAM_TEST_SANITIZED"):
        print("SKIP: " + unsanitized)
        sys.exit(77)
    return sys.argv[1:]


def plugin_over_fake_driver(devices, extra=()):
    """The start of a test that drives libvram_torch.so over the fake driver: (library, fake
    driver, *extra arguments named in `extra`) from the arguments, the environment that makes the
    plug-in load the fake with `devices` devices of 1 GiB; SKIP (77) in the sanitizer build
    without its runtimes preloaded."""
    if os.environ.get("VRAM_TEST_SANITIZED") and not os.environ.get("VRAM_TEST_PRELOADED"):
        print("SKIP: the sanitizer build's library cannot be loaded into an uninstrumented python "
              "without the sanitizers' runtimes preloaded (tests/extra.cmake)")
        sys.exit(77)
    args = script_args(2 + len(extra), "usage: %s LIBVRAM_TORCH FAKE_LIBCUDA %s"
                       % (os.path.basename(sys.argv[0]), " ".join(extra)))
    os.environ.update({"VRAM_TORCH_LIBRARY": args[0], "VRAM_LIBCUDA": args[1], "FAKE_CUDA_MEMORY": str(1 << 30),
                       "FAKE_CUDA_DEVICES": str(devices), "VRAM_ALLOC_CONF": ""})
    return args


def run(cmd, timeout=300, **kw):
    """The command's CompletedProcess (stdout and stderr as text). One that cannot start (not
    built, not installed) or runs past `timeout` seconds is a failure with status 127, so that a
    test counts it as a failed check rather than stopping at a traceback."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(cmd, 127, "", str(e))


def check_installed_vram(how, vram, version, trace, cwd):
    """Checks an installed `vram` command, run from cwd: its version, a replay of trace, and a
    2-step `vram train` with no --data, which must read the corpus installed beside its bin/."""
    r = run([vram, "version"], cwd=cwd)
    check(r.returncode == 0 and r.stdout.strip() == f"vram {version}", f"{how}: vram version: {r.stdout.strip()!r}")
    r = run([vram, "replay", trace], cwd=cwd)
    check(r.returncode == 0 and "peak requested" in r.stdout, f"{how}: vram replays a trace ({r.stderr.strip()[-200:]})")
    r = run([vram, "train", "--steps", "2", "--layers", "1", "--heads", "1", "--width", "16", "--context", "16",
             "--batch", "2", "--threads", "1"], cwd=cwd)
    corpus = os.path.join(os.path.dirname(vram), "..", "share", "vram", "kjv.txt")
    check(r.returncode == 0 and corpus in r.stdout,
          f"{how}: vram trains on its installed corpus: {r.stdout.strip()[:300]} {r.stderr.strip()[-200:]}")


def take_string(lib, ptr):
    """The plug-in's malloc'd string at ptr, decoded, freed with vram_torch_string_free (whose
    argtypes the caller has set); None for NULL."""
    if not ptr:
        return None
    import ctypes
    s = ctypes.string_at(ptr).decode()
    lib.vram_torch_string_free(ptr)
    return s

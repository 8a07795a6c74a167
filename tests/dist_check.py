#!/usr/bin/env python3
"""dist_check.py — end-to-end checks of data parallel `vram train` (CTest), in four parts:

  launcher  no MPI needed: a missing or wrong launcher variable (torchrun's, mpirun's, Slurm's),
            the MPI engine under torchrun's variables, --ranks where mpirun is not installed,
            engine and device that do not go together: each one clear message, non-zero status,
            within a bounded time.
  match     (Open MPI; tests/install_mpi.sh installs it, else skipped): N ranks of --batch b
            follow the one-process run of --batch N*b step by step (the losses, the validation
            loss), for plain DDP at 2 and 4 ranks, with gradient accumulation, and with ZeRO-1
            (adamw and momentum SGD); ZeRO-1's optimizer state per rank is 1/N of the one
            process's within one bucket; the overlap is printed each step; the communication
            buffers show as their own category. The sanitizer build (VRAM_TEST_SANITIZED=1),
            ten times slower, runs fewer steps and one case of each kind.
  faults    (Open MPI): a rank that dies and a rank that hangs end every rank with a message and
            a non-zero status within a bounded time; a missing libmpi is a clear message.
  gpu       (label gpu; skipped without a GPU or libnccl.so.2): one rank of the NCCL engine,
            launched with torchrun's variables (no MPI), follows the one-process GPU run, plain,
            with ZeRO-1 and with accumulation.

usage: dist_check.py VRAM_BINARY CORPUS launcher|match|faults|gpu
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

VRAM, CORPUS, PART = sys.argv[1], sys.argv[2], sys.argv[3]
BASE = ["--data", CORPUS, "--log-every", "1", "--bucket-mb", "0.3"]
CLEAN = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMIX_", "SLURM_")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                                       "MASTER_ADDR", "MASTER_PORT")}
MPI_ENV = dict(CLEAN, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")


def run(cmd, env=None, timeout=300):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env if env is not None else CLEAN)
        rc, out, err = p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, out, err = "timeout", "", ""
    return rc, out, err, time.monotonic() - t0


def train(args, env=None, timeout=300):
    return run([VRAM, "train", *args], env=env, timeout=timeout)


def mpi(n, args, env=None, timeout=300):
    e = dict(MPI_ENV, **(env or {}))
    cmd = ["mpirun", "-n", str(n), "--oversubscribe"]
    for k in list(env or {}) + [k for k in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS") if k in e]:
        cmd += ["-x", k]
    return run(cmd + [VRAM, "train", *args, "--dist", "mpi"], env=e, timeout=timeout)


def losses(out):
    return [float(x) for x in re.findall(r"^step +\d+/\d+ \| loss ([0-9.]+)", out, re.M)]


def val_losses(out):
    return [float(x) for x in re.findall(r"val loss ([0-9.]+)", out)]


def opt_bytes(out):
    m = re.search(r"^optimizer state: (\d+) bytes", out, re.M)
    return int(m.group(1)) if m else None


def same(a, b, tol=2e-4):
    return len(a) == len(b) and len(a) > 0 and all(abs(x - y) <= tol for x, y in zip(a, b))


def part_launcher():
    args = ["--data", CORPUS, "--steps", "2", "--batch", "2", "--dist", "mpi"]
    cases = [
        ({}, "no launcher: start the ranks with `mpirun"),
        ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, "MASTER_PORT is not set"),
        ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"},
         "RANK=2 is not below WORLD_SIZE=2"),
        ({"RANK": "0", "WORLD_SIZE": "two", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"},
         "WORLD_SIZE='two' is not a number"),
        ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "99999"},
         "MASTER_PORT='99999' is not a number in \\[1, 65535\\]"),
        ({"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}, "RANK is not set"),
        ({"OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_RANK is not set"),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, "MASTER_ADDR is not set"),
        ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"},
         "the MPI engine needs ranks started by mpirun"),
    ]
    for env, want in cases:
        rc, out, err, dt = train(args, env=dict(CLEAN, **env), timeout=60)
        check(rc not in (0, "timeout") and re.search(want, err) is not None and dt < 30,
              "launcher %s: status %s in %.1f s, stderr %r (wanted /%s/)" % (env, rc, dt, err[-300:], want))
    rc, out, err, dt = train(["--data", CORPUS, "--steps", "2", "--ranks", "2"], env=dict(CLEAN, PATH="/nonexistent"))
    check(rc == 1 and "mpirun is not installed" in err, "--ranks without mpirun: %s %r" % (rc, err))
    rc, out, err, dt = train(["--data", CORPUS, "--dist", "nccl"])
    check(rc == 2 and "use --dist mpi with --device cpu" in err, "--dist nccl on the CPU: %s %r" % (rc, err))
    rc, out, err, dt = train(["--data", CORPUS, "--zero", "1"])
    check(rc == 2 and "it needs --dist or --ranks" in err, "--zero without ranks: %s %r" % (rc, err))
    rc, out, err, dt = train(["--data", CORPUS, "--dist", "mpi", "--save", "/tmp/x.vram"])
    check(rc == 2 and "not supported with --dist" in err, "--save with --dist: %s %r" % (rc, err))
    rc, out, err, dt = train(["--data", CORPUS, "--dist", "gloo"])
    check(rc == 2 and "not mpi or nccl" in err, "--dist gloo: %s %r" % (rc, err))


def need_mpi():
    if not shutil.which("mpirun"):
        print("dist_check: SKIP: mpirun is not installed (tests/install_mpi.sh says why)")
        sys.exit(77)


def compare(name, n, b, extra, single_extra=None):
    """Runs one process at --batch n*b and n ranks at --batch b; returns (single out, ranks out)."""
    rc1, out1, err1, _ = train(BASE + ["--batch", str(n * b)] + (single_extra or extra))
    rcn, outn, errn, _ = mpi(n, BASE + ["--batch", str(b)] + extra)
    ok = check(rc1 == 0 and rcn == 0, "%s: status %s / %s: %s %s" % (name, rc1, rcn, err1[-400:], errn[-600:]))
    a, c = losses(out1), losses(outn)
    check(ok and same(a, c), "%s: losses of %d ranks x %d %s != one process x %d %s" % (name, n, b, c, n * b, a))
    print("%s: one process %s, %d ranks %s" % (name, a, n, c))
    return out1, outn


SANITIZED = os.environ.get("VRAM_TEST_SANITIZED") == "1"  # (ten times slower: fewer steps and cases)


def part_match():
    need_mpi()
    steps = ["--steps", "3" if SANITIZED else "5"]
    out1, out2 = compare("ddp 2 ranks (eval)", 2, 4, steps + ["--eval-every", "3" if SANITIZED else "5",
                                                              "--eval-batches", "2"])
    check(same(val_losses(out1), val_losses(out2)), "val loss %s vs %s" % (val_losses(out1), val_losses(out2)))
    shares = [float(x) for x in re.findall(r"(\d+)% hidden behind backward", out2)]
    check(len(shares) == int(steps[1]) and all(0 <= s <= 100 for s in shares), "overlap printed each step: %s" % shares)
    comm = re.search(r"^  communication +(\d+) +(\d+)", out2, re.M)
    check(comm is not None and int(comm.group(1)) > 0, "communication buffers as a category per rank")
    check(opt_bytes(out2) == opt_bytes(out1), "DDP keeps a whole optimizer state: %s vs %s" % (opt_bytes(out2), opt_bytes(out1)))
    if not SANITIZED:
        compare("ddp 4 ranks", 4, 2, steps)
        compare("ddp 2 ranks, accum 2", 2, 2, steps + ["--accum", "2"])
    compare("ddp 4 ranks, accum 3, checkpoint", 4, 1, ["--steps", "3", "--accum", "3", "--checkpoint"])
    for n, b, opt in ((4, 2, "adamw"),) if SANITIZED else ((2, 4, "adamw"), (4, 2, "adamw"), (2, 4, "momentum")):
        single, ranks = compare("zero-1 %d ranks %s" % (n, opt), n, b, steps + ["--optimizer", opt, "--zero", "1"],
                                steps + ["--optimizer", opt])
        s, r = opt_bytes(single), opt_bytes(ranks)
        check(s and r and abs(r - s / n) <= 0.3e6 and r < s,
              "zero-1 %d ranks %s: optimizer state %s bytes per rank vs %s / %d" % (n, opt, r, s, n))
        print("zero-1 %d ranks %s: optimizer state per rank %s bytes, one process %s (1/%d = %.0f)" % (n, opt, r, s, n, s / n))


def part_faults():
    need_mpi()
    args = BASE + ["--batch", "2", "--steps", "8", "--dist-timeout", "4"]
    rc, out, err, dt = mpi(2, args, env={"VRAM_DIST_FAULT": "1:3"}, timeout=120)
    check(rc not in (0, "timeout") and dt < 60, "a dying rank: status %s after %.1f s" % (rc, dt))
    check("rank 1: VRAM_DIST_FAULT: ending abruptly" in err and "rank 0 of 2: stopped by the launcher" in err,
          "a dying rank: both ranks say what happened: %r" % err[-800:])
    rc, out, err, dt = mpi(2, args, env={"VRAM_DIST_FAULT": "1:3:hang"}, timeout=120)
    check(rc not in (0, "timeout") and dt < 4 + 40, "a hanging rank: status %s after %.1f s" % (rc, dt))
    check("rank 0 of 2: all-reduce did not complete within 4 s" in err, "a hanging rank: rank 0 says so: %r" % err[-800:])
    rc, out, err, dt = mpi(2, args, env={"VRAM_LIBMPI": "/nonexistent/libmpi.so.40"}, timeout=120)
    check(rc not in (0, "timeout") and "no MPI: dlopen(\"/nonexistent/libmpi.so.40\") failed" in err,
          "no libmpi: status %s, %r" % (rc, err[-400:]))


def find_nccl():
    """libnccl.so.2: VRAM_LIBNCCL, the loader's, the CUDA toolkit's, or PyTorch's wheel's (nvidia-nccl)."""
    if os.environ.get("VRAM_LIBNCCL"):
        return os.environ["VRAM_LIBNCCL"]
    p = subprocess.run(["sh", "-c", "ldconfig -p 2>/dev/null | grep -q 'libnccl\\.so\\.2 '"])
    if p.returncode == 0:
        return "libnccl.so.2"
    import glob
    import site
    roots = ["/usr/local/cuda*/lib64", "/usr/local/cuda*/targets/*/lib", "/usr/lib/x86_64-linux-gnu"]
    roots += [os.path.join(d, "nvidia", "nccl", "lib") for d in site.getsitepackages() + [site.getusersitepackages()]]
    for r in roots:
        hits = sorted(glob.glob(os.path.join(r, "libnccl.so.2*")))
        if hits:
            return hits[0]
    return None


def free_port():
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def part_gpu():
    """One GPU: the NCCL path with one rank (torchrun's variables, the TCP rendezvous, no MPI)
    follows the one-process run, plain and ZeRO-1."""
    rc, out, err, _ = train(["--data", CORPUS, "--device", "cuda:0", "--steps", "1", "--batch", "1"], timeout=300)
    if rc != 0:
        print("dist_check: SKIP: no GPU here (%s)" % (err.strip().splitlines() or ["?"])[-1])
        sys.exit(77)
    nccl = find_nccl()
    if not nccl:
        print("dist_check: SKIP: no libnccl.so.2 found (set VRAM_LIBNCCL)")
        sys.exit(77)
    rc1, out1, err1, _ = train(BASE + ["--device", "cuda:0", "--steps", "8", "--batch", "8"], timeout=300)
    check(rc1 == 0, "gpu one process: %s %r" % (rc1, err1[-400:]))
    # (batch 4 x accum 2 draws the same 8 windows as batch 8; --device cuda: LOCAL_RANK picks the GPU)
    for extra in (["--batch", "8"], ["--batch", "8", "--zero", "1"], ["--batch", "4", "--accum", "2"]):
        env = dict(CLEAN, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()), VRAM_LIBNCCL=nccl)
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")  # (one machine, perhaps without a network)
        rcn, outn, errn, _ = train(BASE + ["--device", "cuda", "--steps", "8", "--dist", "nccl"] + extra, env=env,
                                   timeout=300)
        ok = check(rcn == 0 and "NCCL" in outn, "gpu nccl %s: %s %r" % (extra, rcn, errn[-600:]))
        l1, ln = losses(out1), losses(outn)
        check(ok and same(l1, ln, 2e-3), "gpu nccl %s: losses %s vs one process %s" % (extra, ln, l1))
        print("gpu nccl 1 rank %s: %s (one process %s)" % (" ".join(extra) or "ddp", ln, l1))
        for line in outn.splitlines():
            if line.startswith(("data parallel", "optimizer state")):
                print("  " + line)


{"launcher": part_launcher, "match": part_match, "faults": part_faults, "gpu": part_gpu}[PART]()
sys.exit(done("dist_check " + PART))

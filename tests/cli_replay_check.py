#!/usr/bin/env python3
"""cli_replay_check.py — end-to-end checks of `vram replay` and `vram bench alloc` (CTest).

Runs the built `vram` binary the way a user does and checks what comes out: exit statuses
(0 ok, 1 out of memory, 2 bad input or usage), one clear stderr line naming the trace line for
every kind of bad trace, JSON output that parses and whose fields agree with each other and
with the trace, the summary table's layout, the snapshot file, stdin and gzip input, and a
trace of several programs ("# workload:" lines) measured per program.

usage: cli_replay_check.py VRAM_BINARY SOURCE_DIR [replay|bench]
"""
import gzip
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

VRAM, SRC = sys.argv[1], sys.argv[2]
PART = sys.argv[3] if len(sys.argv) > 3 else "replay"


def run(*args, stdin=None):
    p = subprocess.run([VRAM, *args], input=stdin, capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def bad_traces(tmp):
    head = "# memtrace v1\n# source: test\n"
    cases = [
        ("a 1 512 0\nf 2\n", 4, "free of unknown id 2"),
        ("a 1 512 0\na 1 64 0\n", 4, "allocated twice"),
        ("a 1 512 0\nf 1\nf 1\n", 5, "already freed"),
        ("a 1 -512 0\n", 3, "negative"),
        ("a 1 5x2 0\n", 3, "not a decimal number"),
        ("a 1 123456789012345678901234 0\n", 3, "too large"),
        ("z 1\n", 3, "unknown record"),
        ("a 1 512\n", 3, "missing"),
        ("a 1 512 0 0\n", 3, "extra field"),
        ("a 1 512 0\na 2 10", 4, "truncated"),
    ]
    for body, line, needle in cases:
        path = os.path.join(tmp, "bad.trace")
        with open(path, "w") as f:
            f.write(head + body)
        rc, out, err = run("replay", path)
        lines = err.strip().splitlines()
        check(rc == 2, f"bad trace ({needle}) exits 2, got {rc}")
        check(len(lines) == 1, f"bad trace ({needle}): one stderr line, got {lines}")
        check(f"line {line}:" in err and needle in err, f"bad trace ({needle}) names line {line}: {err.strip()}")
        check(out == "", f"bad trace ({needle}): nothing on stdout")
        # The same through gzip and through stdin.
        gz = path + ".gz"
        with gzip.open(gz, "wt") as f:
            f.write(head + body)
        rc, _, err = run("replay", gz)
        check(rc == 2 and f"line {line}:" in err, f"gzip bad trace ({needle}): {rc} {err.strip()}")
        rc, _, err = run("replay", "-", stdin=(head + body).encode())
        check(rc == 2 and f"line {line}:" in err and "<stdin>" in err, f"stdin bad trace ({needle}): {rc} {err.strip()}")
    path = os.path.join(tmp, "noheader.trace")
    with open(path, "w") as f:
        f.write("a 1 512 0\n")
    rc, _, err = run("replay", path)
    check(rc == 2 and "line 1:" in err and "memtrace v1" in err, f"missing header: {err.strip()}")
    rc, _, err = run("replay", os.path.join(tmp, "does-not-exist.trace"))
    check(rc == 2 and "does-not-exist.trace" in err, f"missing file: {rc} {err.strip()}")


def usage_errors():
    for args, needle in [
        (["replay", "--bogus", "x.trace"], "--bogus"),
        (["replay"], "no trace"),
        (["replay", "--capacity", "lots", "x.trace"], "lots"),
        (["replay", "--capacity"], "needs a value"),
        (["replay", "--device", "quantum", os.path.join(SRC, "traces/resnet50_train.trace.gz")], "quantum"),
        (["replay", "--conf", "bogus_key:1", "x.trace"], "vram replay: --conf: unknown key 'bogus_key'"),
        (["replay", "--device", "sim:1GiB", "--capacity", "2GiB", "x.trace"], "both give the device's size"),
        (["bench", "alloc", "--repeat", "0"], "repeat"),
        (["bench", "alloc", "--frobnicate"], "--frobnicate"),
        (["bench", "nosuch"], "nosuch"),
        (["nosuchcommand"], "nosuchcommand"),
    ]:
        rc, out, err = run(*args)
        check(rc == 2, f"{args}: exit 2, got {rc}")
        check(needle in err, f"{args}: message names '{needle}': {err.strip()}")
    rc, out, _ = run("replay", "--help")
    check(rc == 0 and "--capacity" in out and "--fit" in out, "replay --help")
    rc, out, _ = run("bench", "--help")
    check(rc == 0 and "--repeat" in out, "bench --help")
    # no benchmark named: a line saying so before the usage (there was the usage alone), on stderr
    rc, out, err = run("bench")
    check(rc == 2 and out == "" and err.startswith("vram bench: no benchmark given (known: alloc)\nusage: vram bench"),
          "bench without a benchmark: %d %r" % (rc, err[:120]))
    rc, out, _ = run("version", "--help")  # every command has its --help, as `vram --help` promises
    check(rc == 0 and "usage: vram version" in out, "version --help: %d %r" % (rc, out))
    # an implausible recorded figure is ignored with a warning, not printed as PyTorch's
    rc, out, err = run("replay", "-", stdin=b"# memtrace v1\n# pytorch_native_peak_reserved_bytes: 18446744073709551615\n"
                       b"# peak_requested_bytes: lots\na 1 10 0\nf 1\n")
    check(rc == 0 and "native" not in out and err.count("not a plausible byte count") == 2, "header figures checked: %r" % err)
    # gzip data on standard input is read as from a file; trailing garbage after it is an error
    small = gzip.compress(b"# memtrace v1\na 1 10 0\nf 1\n")
    rc, out, err = run("replay", "-", stdin=small)
    check(rc == 0 and "1 allocations" in out, "gzip on stdin: %d %r" % (rc, err))
    rc, out, err = run("replay", "-", stdin=small + b"garbage")
    check(rc == 2 and "data after the gzip data that starts no gzip member" in err, "gzip on stdin with garbage "
          "after it: %d %r" % (rc, err))
    # standard input named twice is refused before any replay (the first replayed, the second failed)
    rc, out, err = run("replay", "-", "-", stdin=b"# memtrace v1\na 1 10 0\nf 1\n")
    check(rc == 2 and out == "" and "standard input ('-') given 2 times" in err and len(err.splitlines()) == 1,
          "stdin twice refused up front: %d %r %r" % (rc, out[:80], err))
    # endless input on standard input that is no trace stops at its start too
    with open("/dev/zero", "rb") as zero:
        p = subprocess.run([VRAM, "replay", "-"], stdin=zero, capture_output=True, timeout=60)
    check(p.returncode == 2 and b"bad header" in p.stderr, "endless zeros on stdin: %d %r" % (p.returncode, p.stderr[:200]))
    # ...but a figure equal to an enormous peak is plausible (the check once overflowed at 2^62 bytes)
    rc, out, err = run("replay", "-", stdin=b"# memtrace v1\n# peak_requested_bytes: 4611686018427387904\n"
                       b"a 1 4611686018427387904 0\nf 1\n")
    check("plausible" not in err, "a header equal to a 2^62-byte peak: no warning: %r" % err)
    # a trace's own header text reaches the terminal without its control characters
    rc, out, _ = run("replay", "-", stdin=b"# memtrace v1\n# source: a \x1b[31mred\x1b[0m b\na 1 10 0\nf 1\n")
    check(rc == 0 and "\x1b" not in out and "(a ?[31mred?[0m b)" in out, "source shown without escapes: %r" % out[:120])
    # ...and so do its workload names and a header figure that is not one (both were printed raw)
    rc, out, err = run("replay", "-", stdin=b"# memtrace v1\n# peak_requested_bytes: 1\x1b[2J\n"
                       b"# workload: w\x1b]0;x\x07\na 1 10 0\nf 1\n")
    check(rc == 0 and "\x1b" not in out + err and "    w?]0;x?" in out and "header 'peak_requested_bytes: 1?[2J'" in err,
          "workload name and header warning shown without escapes: %r %r" % (out[-200:], err))
    # ...nor bytes that are not UTF-8, while UTF-8 names show as written, in their column
    rc, out, err = run("replay", "-", stdin="# memtrace v1\n# workload: entraînement\na 0 512 0\n".encode()
                       + b"# workload: b\xff\na 1 512 0\n")
    rows = [l for l in out.splitlines() if l.startswith("    ") and ("entra" in l or l.startswith("    b"))]
    check(rc == 0 and len(rows) == 2 and rows[0].startswith("    entraînement ") and rows[1].startswith("    b? ")
          and rows[0].index("512 bytes") + 9 == rows[1].index("1.00 KiB") + 8,
          "UTF-8 names as written and aligned, other bytes as '?': %r" % rows)


def tiny_trace(tmp):
    text = ("# memtrace v1\n# peak_requested_bytes: 3003100\n"
            "# pytorch_native_peak_reserved_bytes: 23068672\n"
            "a 0 1000 0\na 1 3000 0\nf 0\na 2 100 1\na 3 3000000 0\nf 3\nf 1\na 4 0 0\nf 2\nf 4\n")
    path = os.path.join(tmp, "tiny.trace")
    with open(path, "w") as f:
        f.write(text)
    rc, out, err = run("replay", "--json", "--fit", path)
    check(rc == 0, f"tiny replay exits 0: {rc} {err}")
    d = json.loads(out)
    check(d["events"] == 10 and d["allocs"] == 5 and d["empty_allocs"] == 1 and d["frees"] == 5, f"tiny counts {d}")
    rc, text_out, _ = run("replay", path)
    check(rc == 0 and "1 request of 0 bytes (empty tensors) took no memory" in text_out, "empty requests named: %r" % text_out)
    check(d["peak_requested_bytes"] == 3003100, "tiny peak requested")
    check(d["peak_allocated_bytes"] == 3003904, "tiny peak allocated (512-byte rounding)")
    check(d["peak_reserved_bytes"] >= d["peak_allocated_bytes"], "reserved >= allocated")
    check(abs(d["reserved_over_requested"] - d["peak_reserved_bytes"] / 3003100) < 1e-5, "ratio agrees")
    check(d["pytorch_native_peak_reserved_bytes"] == 23068672, "header figure carried")
    check(d["fit_capacity_bytes"] >= 3003100 and d["fit_over_requested"] >= 1.0, "fit fields")
    check(d["oom"] is False, "no oom")
    # On the simulated CUDA device, with a capacity: its name, the capacity, a fit.
    rc, out3, err3 = run("replay", "--json", "--fit", "--device", "cudasim", "--capacity", "1GiB", path)
    d3 = json.loads(out3) if rc == 0 else {}
    check(rc == 0 and d3.get("device") == "cudasim (1.00 GiB)" and d3.get("fit_capacity_bytes", 0) >= 3003100,
          f"cudasim replay: {rc} {err3.strip()} {d3.get('device')}")
    # With its GPU's work lagging: the lag in its name, kept with a capacity and through the fit.
    rc, out4, err4 = run("replay", "--json", "--fit", "--device", "cudasim:lag=100", "--capacity", "1GiB", path)
    d4 = json.loads(out4) if rc == 0 else {}
    check(rc == 0 and d4.get("device") == "cudasim (1.00 GiB), lag 100" and d4.get("fit_capacity_bytes", 0) >= 3003100,
          f"cudasim lag replay: {rc} {err4.strip()} {d4.get('device')}")
    # ...however long the spec (from 64 characters it was an 80 GiB device capped at 1 GiB)
    rc, out4, err4 = run("replay", "--json", "--device", "cudasim:lag=" + "0" * 60 + "5", "--capacity", "1GiB", path)
    d4 = json.loads(out4) if rc == 0 else {}
    check(rc == 0 and d4.get("device") == "cudasim (1.00 GiB), lag 5", f"long cudasim spec: {rc} {err4.strip()} {d4.get('device')}")
    rc, _, err5 = run("replay", "--device", "cudasim:lag=soon", path)
    check(rc == 2 and "cudasim device: lag 'soon'" in err5 and "Traceback" not in err5, f"bad lag refused: {rc} {err5.strip()}")
    # The same on stdin.
    rc, out2, _ = run("replay", "--json", "-", stdin=text.encode())
    check(rc == 0 and json.loads(out2)["peak_allocated_bytes"] == 3003904, "stdin replay")

    # Out of memory: exit 1, the failing event and line, an OOM report.
    oom = os.path.join(tmp, "oom.trace")
    with open(oom, "w") as f:
        f.write("# memtrace v1\na 0 1000 0\na 1 2000 0\n\na 2 8388608 0\nf 0\n")
    rc, out, err = run("replay", "--capacity", "4MiB", oom)
    check(rc == 1, f"OOM exits 1, got {rc}")
    check("line 5" in err and "8388608" in err, f"OOM names line 5: {err.strip()}")
    rc, out, err = run("replay", "--json", "--capacity", "4MiB", oom)
    d = json.loads(out)
    check(rc == 1 and d["oom"] is True and d["failed_event"] == 2 and d["failed_line"] == 5, f"OOM json {d}")
    check(d["ooms"] == 1 and len(d["oom_report"]) > 0, "OOM json report")
    # a request larger than any device: counted and reported with the allocator's reason (it said
    # "oom": true beside "ooms": 0, with an empty report and no reason on stderr)
    huge = os.path.join(tmp, "huge.trace")
    with open(huge, "w") as f:
        f.write("# memtrace v1\na 1 9007199254740992 0\nf 1\n")
    rc, out, err = run("replay", "--json", huge)
    d = json.loads(out) if out else {}
    check(rc == 1 and d.get("oom") is True and d.get("ooms") == 1 and "larger than any device" in d.get("oom_report", ""),
          f"huge request json: {rc} {d.get('ooms')} {d.get('oom_report')!r}")
    rc, out, err = run("replay", huge)
    check(rc == 1 and "larger than any device" in err and "1 OOMs" in out, f"huge request text: {rc} {err!r}")

    # Summary at the peak: the PyTorch table, every line 77 characters.
    rc, out, err = run("replay", "--summary", path)
    table = [l for l in out.splitlines() if l.startswith("|")]
    check(rc == 0 and len(table) >= 47, f"summary printed ({len(table)} lines)")
    check(all(len(l) == 77 for l in table), "summary lines are 77 characters")
    check("vram memory summary, device ID 0" in out and "peak of reserved memory (event 4" in out, "summary title/event")
    check(any(l.startswith("| Allocated memory      |") and "2933 KiB" in l for l in table),
          "summary at the peak shows the allocated peak (3003904 B = 2933 KiB)")

    # Snapshot at the peak.
    snap = os.path.join(tmp, "snap.json")
    rc, out, err = run("replay", "--snapshot", snap, path)
    check(rc == 0, f"snapshot run: {rc} {err}")
    with open(snap) as f:
        s = json.load(f)
    check(isinstance(s["segments"], list) and len(s["segments"]) >= 1, "snapshot segments")
    blocks = [b for seg in s["segments"] for b in seg["blocks"]]
    live = [b for b in blocks if b["state"] == "active_allocated"]
    check(len(live) == 3 and sum(b["size"] for b in live) == 3003904, f"snapshot at the peak holds 3 live blocks: {live}")
    check(all(k in s["segments"][0] for k in ("address", "total_size", "allocated_size", "active_size",
                                              "requested_size", "stream", "segment_type", "is_expandable", "blocks")),
          "snapshot segment keys")
    check("allocator_settings" in s and "device_traces" in s, "snapshot top-level keys")
    rc, _, err = run("replay", "--snapshot", snap, path, path)
    check(rc == 2 and "one trace" in err, "--snapshot with two traces is a usage error")
    missing = os.path.join(os.path.dirname(snap), "no-such-folder", "s.json")
    rc, out, err = run("replay", "--snapshot", missing, path)
    check(rc == 2 and "cannot write there" in err and missing in err and out == "",
          f"a --snapshot path that cannot be written is refused before the replay: {rc} {err!r} {out!r}")
    # a --conf at the 4096-character limit is valid, so the snapshot is written (the history key that
    # the snapshot's replay adds made it too long: 'VRAM_ALLOC_CONF: longer than 4096 characters')
    long_conf = "history:0," * 409
    rc, out, err = run("replay", "--conf", long_conf, "--snapshot", snap, path)
    check(rc == 0 and "snapshot at event" in err and "longer than" not in err, f"--snapshot with a long --conf: {rc} {err!r}")
    # a snapshot that cannot be written whole leaves the previous file as it was, and no half file
    # (it was written in place: a full disk truncated the old snapshot to a broken one); here the
    # disk is "full" at 600 bytes (RLIMIT_FSIZE)
    with open(snap, "w") as f:
        f.write('{"old": 1}\n')
    before = os.listdir(os.path.dirname(snap))

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    p = subprocess.run([VRAM, "replay", "--snapshot", snap, path], capture_output=True, timeout=300,
                       preexec_fn=small_files)
    err = p.stderr.decode()
    with open(snap) as f:
        kept = f.read()
    check(p.returncode == 1 and "writing snapshot" in err and "File too large" in err and len(err.splitlines()) == 1,
          f"a snapshot write that fails says why: {p.returncode} {err!r}")
    check(kept == '{"old": 1}\n' and sorted(os.listdir(os.path.dirname(snap))) == sorted(before),
          f"a failed snapshot write keeps the old file, leaves no other: {kept[:60]!r}")
    # a folder, or an empty path, is refused up front too, with the reason (both were found only
    # after the replay, as "cannot write snapshot")
    for bad, why in ((tmp, "Is a directory"), ("", "No such file")):
        rc, out, err = run("replay", "--snapshot", bad, path)
        check(rc == 2 and "cannot write there" in err and why in err and len(err.splitlines()) == 1 and out == "",
              f"--snapshot {bad!r} is refused before the replay: {rc} {err!r} {out!r}")


def bundled():
    traces = sorted(os.path.join(SRC, "traces", f) for f in os.listdir(os.path.join(SRC, "traces"))
                    if f.endswith(".trace.gz"))
    rc, out, err = run("replay", "--json", *traces)
    check(rc == 0, f"bundled replay exits 0: {err}")
    rows = [json.loads(l) for l in out.splitlines()]
    check(len(rows) == len(traces), "one JSON line per trace")
    for d in rows:
        name = os.path.basename(d["trace"])
        check(d["peak_requested_bytes"] == d["trace_peak_live_bytes"], f"{name}: requested peak = trace's peak")
        check(d["events"] == d["trace_events"] and d["allocs"] == d["trace_allocs"], f"{name}: every event replayed")
        check(d["peak_reserved_bytes"] >= d["peak_allocated_bytes"] >= d["peak_requested_bytes"], f"{name}: ordering")
        check(abs(d["reserved_over_requested"] - d["peak_reserved_bytes"] / d["peak_requested_bytes"]) < 1e-5,
              f"{name}: ratio")
        check(d["events_per_second"] > 0 and d["seconds"] > 0, f"{name}: timing")
        for k in ("device_allocs", "device_frees", "alloc_retries", "ooms"):
            check(isinstance(d[k], int) and d[k] >= 0, f"{name}: {k}")
    rc, out, err = run("replay", *traces)
    check(rc == 0 and "geometric mean" in out and "PyTorch" in out, "human comparison table")


def workloads(tmp):
    """A trace of two programs in one process: a row each, measured from its start."""
    path = os.path.join(tmp, "two.trace")
    with open(path, "w") as f:
        f.write("# memtrace v1\n# workload: train\na 0 4194304 0\na 1 33554432 0\nf 1\n# sync: train step 0\n"
                "# workload: sample\na 2 2097152 0\nf 2\nf 0\n")
    rc, out, err = run("replay", "--json", path)
    check(rc == 0, f"replay of two workloads exits 0: {err}")
    # names in the JSON as written when they are UTF-8 (they were "\u00c3\u00a9" for "é"), invalid bytes as U+FFFD
    rc, text, _ = run("replay", "--json", "-", stdin="# memtrace v1\n# workload: entraînement\na 0 512 0\n".encode()
                      + b'# workload: b\xff"\na 1 512 0\n')
    names = [x["name"] for x in json.loads(text).get("workloads", [])] if rc == 0 else []
    check(names == ["entraînement", 'b\ufffd"'] and '"entraînement"' in text,
          f"UTF-8 names kept, invalid bytes replaced: {rc} {names}")
    d = json.loads(out)
    w = d.get("workloads", [])
    check([x["name"] for x in w] == ["train", "sample"], f"a row per workload: {w}")
    if len(w) == 2:
        check(w[0]["peak_requested_bytes"] == 4194304 + 33554432 and w[1]["peak_requested_bytes"] == 4194304 + 2097152,
              f"each measured from its start, what the first left counted in the second: {w}")
        check(w[0]["events"] == 3 and w[1]["events"] == 3 and not w[1]["oom"], f"events per workload: {w}")
        check(d["peak_requested_bytes"] == w[0]["peak_requested_bytes"], "the whole run's figures stay")
    rc, out, _ = run("replay", path)
    check(rc == 0 and "per workload" in out and "train" in out and "sample" in out, "per-workload rows in text")
    rc, out, _ = run("replay", "--json", os.path.join(SRC, "traces", "resnet50_train.trace.gz"))
    check(rc == 0 and "workloads" not in json.loads(out), "a one-program trace has no workload rows")
    many = os.path.join(tmp, "many.trace")
    with open(many, "w") as f:
        f.write("# memtrace v1\n" + "".join(f"# workload: w{k}\na {k} 512 0\nf {k}\n" for k in range(66)))
    rc, out, err = run("replay", "--json", many)
    check(rc == 0 and len(json.loads(out)["workloads"]) == 64 and "holds 66 workloads: the first 64" in err,
          f"more workloads than rows: said, not dropped silently: {err.strip()}")


def bench():
    rc, out, err = run("bench", "alloc", "--json", "--repeat", "1")
    check(rc == 0, f"bench exits 0: {err}")
    d = json.loads(out)
    check(sorted(d["pair_ns"].keys(), key=int) == ["512", "65536", "1048576", "16777216", "268435456"], "pair sizes")
    check(all(v > 0 for v in d["pair_ns"].values()) and d["random_ns_per_op"] > 0, "positive timings")
    # The random stream of docs/benchmarks.md: its allocations are fixed, so the peak allocated bytes
    # are the same on every machine for 512-byte rounding (PyTorch measured 8.14-8.18 GB).
    check(8.0e9 < d["random_peak_allocated_bytes"] < 8.3e9, f"random peak allocated {d['random_peak_allocated_bytes']}")
    check(d["random_peak_reserved_bytes"] >= d["random_peak_allocated_bytes"], "reserved >= allocated")
    check(d["machine"]["cores"] >= 1 and d["machine"]["cpu"], "machine info")
    # out of memory in a benchmark: the whole report, to its last sentence (it was cut at 256 bytes)
    rc, out, err = run("bench", "alloc", "--repeat", "1", "--device", "cudasim:1GiB")
    check(rc == 1 and "the largest free cached block of the large pool is" in err, "bench OOM report whole: %r" % err[-200:])
    rc, out, _ = run("bench", "alloc", "--repeat", "1")
    check(rc == 0 and "machine:" in out and "ns/pair" in out and "command: vram bench alloc" in out, "bench text")


with tempfile.TemporaryDirectory() as tmp:
    if PART == "replay":
        bad_traces(tmp)
        usage_errors()
        tiny_trace(tmp)
        workloads(tmp)
        bundled()
    else:
        bench()
sys.exit(done("cli_replay_check " + PART))

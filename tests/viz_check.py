#!/usr/bin/env python3
"""viz_check.py — end-to-end checks of `vram viz` (CTest), in two parts:

  inputs   no browser needed: every kind of bad input (truncated, foreign, empty, a pickle given
           to the binary, JSON that is no snapshot, a wrong pickle through vram_torch) is one
           clear message and status 2 with no page left behind (an existing page is untouched),
           and the page is self-contained (no network address), its data compact.
  browser  the page in headless Chromium (tests/install_chromium.sh installs it; without it this
           part exits 77, skipped, saying why): the page's own self-test (#selftest, selftest.js)
           hovers and clicks chosen moments, zooms and pans; its figures are checked against
           ones computed here independently: `vram replay --json` peaks, the sums of a
           `vram replay --snapshot` snapshot taken at a known event, requested bytes added up
           from the trace's text, a snapshot JSON's and a pickle's own segments. No page error,
           every moment of a zoomed-in window reachable, a --png picture made.

usage: viz_check.py VRAM_BINARY SOURCE_DIR inputs|browser
"""
import glob
import gzip
import html
import json
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done  # noqa: E402

VRAM, SRC, PART = sys.argv[1], sys.argv[2], sys.argv[3]
TRACE = os.path.join(SRC, "traces", "gpt2_train.trace.gz")
STEPS_TRACE = os.path.join(SRC, "traces", "recorded", "vit_train_h200.trace.gz")


def run(*args, env=None):
    p = subprocess.run([VRAM, *args], capture_output=True, timeout=600, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def torch_viz(*args):
    env = dict(os.environ, VRAM_BIN=VRAM, PYTHONPATH=os.path.join(SRC, "python"))
    p = subprocess.run([sys.executable, "-m", "vram_torch", "viz", *args], capture_output=True, timeout=600, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def torch_snapshot_pickle():
    """A snapshot in the layout of PyTorch's torch.cuda.memory._snapshot(), as _dump_snapshot
    pickles it: two segments, three live blocks, a history with frames and a segment_alloc."""
    fr = lambda name, line: {"filename": "train.py", "line": line, "name": name}  # noqa: E731
    blocks0 = [{"address": 0x7f0000000000, "size": 1048576, "requested_size": 1000000, "state": "active_allocated",
                "frames": [fr("linear", 10), fr("forward", 20)]},
               {"address": 0x7f0000100000, "size": 1048576, "requested_size": 1048576, "state": "inactive", "frames": []}]
    blocks1 = [{"address": 0x7f0000200000, "size": 4194304, "requested_size": 4194304, "state": "active_allocated",
                "frames": [fr("adam_step", 30)]},
               {"address": 0x7f0000600000, "size": 2097152, "requested_size": 2000000, "state": "active_allocated",
                "frames": [fr("linear", 10), fr("forward", 20)]}]
    segs = [{"device": 0, "address": 0x7f0000000000, "total_size": 2097152, "allocated_size": 1048576, "active_size": 1048576,
             "requested_size": 1000000, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
             "is_expandable": False, "frames": [], "blocks": blocks0},
            {"device": 0, "address": 0x7f0000200000, "total_size": 8388608, "allocated_size": 6291456, "active_size": 6291456,
             "requested_size": 6194304, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
             "is_expandable": False, "frames": [], "blocks": blocks1}]
    ev = lambda action, addr, size, frames: {"action": action, "addr": addr, "size": size, "stream": 0,  # noqa: E731
                                             "time_us": 1000 + len(events), "frames": frames}
    events = []
    events.append(ev("segment_alloc", 0x7f0000200000, 8388608, []))
    events.append(ev("alloc", 0x7f0000200000, 4194304, [fr("adam_step", 30)]))
    events.append(ev("alloc", 0x7f0000800000 - 2097152, 2000000, [fr("linear", 10)]))
    events.append(ev("alloc", 0x7f0000100000, 1048576, [fr("dropout", 40)]))
    events.append(ev("free_requested", 0x7f0000100000, 1048576, []))
    events.append(ev("free_completed", 0x7f0000100000, 1048576, []))
    return {"segments": segs, "device_traces": [events], "allocator_settings": {}}


def no_leftovers(folder, what):
    left = [f for f in os.listdir(folder) if ".tmp." in f]
    check(not left, "%s: no temporary page left behind, found %s" % (what, left))


def bad_inputs(tmp):
    out = os.path.join(tmp, "page.html")
    with open(out, "w") as f:
        f.write("an earlier page\n")
    with gzip.open(TRACE, "rt") as f:
        text = f.read()
    cases = {
        "truncated.trace": (text[:5000].rsplit("\n", 1)[0] + "\na 99999 12", "truncated"),
        "foreign.bin": (b"\x89PNG\r\n\x1a\n" + bytes(range(200)), "neither a memtrace"),
        "foreign.txt": ("hello, world\n", "neither a memtrace"),
        "empty.trace": ("# memtrace v1\n# source: nothing\n", "no events"),
        "zero.bytes": ("", "is empty"),
        "cut.json": (json.dumps({"segments": [{"address": 1, "total_size": 2, "blocks": []}]})[:40], "cut short"),
        "other.json": (json.dumps({"hello": [1, 2, 3]}), "not a memory snapshot"),
        "list.json": ("[1, 2]", "not a memory snapshot"),
        "given.pickle": (pickle.dumps(torch_snapshot_pickle(), protocol=4), "python -m vram_torch viz"),
        "badfree.trace": ("# memtrace v1\na 1 512 0\nf 2\n", "line 3"),
    }
    for name, (body, needle) in cases.items():
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(body if isinstance(body, bytes) else body.encode())
        rc, so, se = run("viz", path, "-o", out)
        lines = se.strip().splitlines()
        check(rc == 2, "%s: exit status 2, got %d (%s)" % (name, rc, se.strip()))
        check(len(lines) == 1 and needle in se, "%s: one line naming the problem (%r), got %r" % (name, needle, se))
        check(so == "", "%s: nothing on stdout" % name)
        with open(out) as f:
            check(f.read() == "an earlier page\n", "%s: the existing page is left as it was" % name)
        no_leftovers(tmp, name)
    # A good input beside a bad one: still nothing written.
    rc, _, se = run("viz", TRACE, os.path.join(tmp, "foreign.txt"), "-o", out)
    check(rc == 2 and open(out).read() == "an earlier page\n", "a bad second input fails the page: %d %s" % (rc, se))
    for args, needle in ((["viz"], "no input"), (["viz", TRACE], "no output"), (["viz", "--bogus", TRACE, "-o", out], "unknown option"),
                         (["viz", os.path.join(tmp, "missing.trace"), "-o", out], "missing.trace")):
        rc, _, se = run(*args)
        check(rc == 2 and needle in se, "%s: status 2 naming %r, got %d %r" % (args, needle, rc, se[:200]))
    rc, _, se = run("viz", TRACE, "--capacity", "1GiB", "-o", out)
    check(rc == 1 and len(se.strip().splitlines()) == 1 and "line 199: out of memory" in se and open(out).read() == "an earlier page\n",
          "a replay out of memory: status 1, one line naming the trace line, the page untouched: %d %r" % (rc, se[:200]))
    rc, so, _ = run("viz", "--help")
    check(rc == 0 and "usage: vram viz" in so, "--help prints the usage, status 0")
    # An output that cannot be written: status 1, one line.
    rc, _, se = run("viz", TRACE, "-o", os.path.join(tmp, "no", "such", "dir", "p.html"))
    check(rc == 1 and len(se.strip().splitlines()) == 1, "an unwritable output is status 1 with one line: %d %r" % (rc, se))
    # Pickles through vram_torch: a wrong one is one message and status 2.
    wrong = {"list.pickle": pickle.dumps([1, 2, 3]), "nosegments.pickle": pickle.dumps({"a": 1}),
             "class.pickle": pickle.dumps(ValueError("x")), "cut.pickle": pickle.dumps(torch_snapshot_pickle())[:100]}
    for name, body in wrong.items():
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(body)
        rc, so, se = torch_viz(path, "-o", out)
        check(rc == 2 and len(se.strip().splitlines()) == 1 and name in se, "vram_torch viz %s: one line, status 2: %d %r" % (name, rc, se))
        check(open(out).read() == "an earlier page\n", "vram_torch viz %s: the page untouched" % name)


def page_properties(tmp):
    out = os.path.join(tmp, "g.html")
    rc, so, se = run("viz", TRACE, "-o", out)
    check(rc == 0 and "wrote" in so, "a bundled trace draws: %d %s" % (rc, se))
    page = open(out, encoding="utf-8").read()
    check(not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page), "the page loads nothing from the network")
    check("http://" not in page and "https://" not in page, "no web address in the page at all")
    check(page.count('<script type="application/octet-stream"') == 1, "the data is one binary block")
    check(os.stat(out).st_mode & 0o644 == 0o644, "the page is readable like any new file")
    no_leftovers(tmp, "good page")


def page_meta(path):
    """The page's metadata block, parsed as the page parses it."""
    page = open(path, encoding="utf-8").read()
    m = re.search(r'<script id="vram-meta" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(m.group(1)) if m else None, page


def meta_and_escaping(tmp):
    """Names from the input reach the page as they were written (any language, emoji), and
    nothing in them can end the page's script blocks."""
    snap = torch_snapshot_pickle()
    evil = "</script><script>window.PWNED=1</script>"
    snap["device_traces"][0][1]["frames"] = [{"filename": "caf\u00e9.py", "line": 3, "name": "\U0001f600 " + evil}]
    path, out = os.path.join(tmp, "names.json"), os.path.join(tmp, "names.html")
    with open(path, "w") as f:
        json.dump(snap, f)  # (json.dump writes the non-ASCII as \u escapes: a surrogate pair for the emoji)
    rc, _, se = run("viz", path, "-o", out)
    check(rc == 0, "a snapshot with odd names draws: %s" % se.strip())
    meta, page = page_meta(out)
    check(meta is not None and len(meta) == 1, "the page's metadata parses as JSON")
    if not meta:
        return
    m = meta[0]
    check(("\U0001f600 " + evil + " (caf\u00e9.py:3)") in m["stacks"], "names keep their characters: %s" % m["stacks"])
    check(page.count("</script>") == page.count("<script"), "no name ends a script block early")
    check(m["finalAllocated"] == sum(g["allocated_size"] for g in snap["segments"]) and
          m["finalReserved"] == sum(g["total_size"] for g in snap["segments"]), "the page carries the snapshot's sums")
    # --png where the browser makes no picture: status 1, one line; the page itself is written.
    env = dict(os.environ, VRAM_CHROMIUM="/bin/false")
    rc, _, se = run("viz", TRACE, "-o", out, "--png", os.path.join(tmp, "x.png"), env=env)
    check(rc == 1 and len(se.strip().splitlines()) == 1 and "no picture" in se, "--png without a working browser: status 1, one line: %r" % se)


MiB = 1 << 20


def categories_record(steps=3):
    """A categories JSON as `python -m vram_torch run --categories` writes it
    (python/vram_torch/category_report.py), with known figures."""
    def phase(peak_cats, reserved):
        total = sum(peak_cats.values())
        return {"peak_allocated": total, "reserved_at_peak_allocated": reserved, "peak_reserved": reserved,
                "allocated_at_peak_reserved": total, "at_peak_allocated": peak_cats, "own_peak": peak_cats,
                "reserved_but_free": reserved - total, "fragmentation": round((reserved - total) / reserved, 4)}
    out = []
    for s in range(1, steps + 1):
        out.append({"step": s, "end": {"allocated": 0, "reserved": 0, "categories": {}}, "phases": {
            "forward": phase({"parameters": 8 * MiB, "buffers": MiB, "activations": 20 * MiB * s, "temporaries": 3 * MiB,
                              "other": 2 * MiB, "gradients": 0}, 64 * MiB * s),
            "backward": phase({"parameters": 8 * MiB, "buffers": MiB, "activations": 10 * MiB, "gradients": 8 * MiB,
                               "temporaries": 5 * MiB}, 64 * MiB * s),
            "optimizer": phase({"parameters": 8 * MiB, "buffers": MiB, "gradients": 8 * MiB, "optimizer_state": 16 * MiB},
                               64 * MiB * s)}})
    return {"format": "vram_torch categories v1", "device": 0, "program": ["train.py"], "categories": [],
            "steps": out, "run": None, "notes": []}


def categories_input(tmp):
    """The categories JSON of `vram_torch run --categories` draws as a moment per phase, at the
    phase's peaks; a record whose categories do not add up, or without steps, is refused."""
    rec = categories_record()
    path, out = os.path.join(tmp, "cats.json"), os.path.join(tmp, "cats.html")
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
    rc, _, se = run("viz", path, "-o", out)
    check(rc == 0, "a categories JSON draws: %s" % se.strip())
    meta, _ = page_meta(out)
    if not check(meta and meta[0]["kind"] == "categories", "its kind is categories"):
        return
    m = meta[0]
    check([l for _, l in m["steps"]][:4] == ["step 1 forward", "step 1 backward", "step 1 optimizer", "step 2 forward"]
          and len(m["steps"]) == 9, "a moment per phase, in order: %s" % m["steps"][:4])
    check(m["peakAllocated"] == (8 + 1 + 60 + 3 + 2) * MiB and m["peakReserved"] == 192 * MiB,
          "the peaks: step 3's forward (%d, %d)" % (m["peakAllocated"], m["peakReserved"]))
    check(m["finalAllocated"] == 33 * MiB and m["finalReserved"] == 192 * MiB, "the end: step 3's optimizer")
    check(set(m["tags"]) == {"parameter", "buffer", "activation", "temporary", "other", "gradient", "optimizer_state"},
          "coloured by the allocator's tag names: %s" % m["tags"])
    bad = json.loads(json.dumps(rec))
    bad["steps"][1]["phases"]["backward"]["at_peak_allocated"]["gradients"] += 1
    for what, doc, text in (("categories that do not add up to the peak", bad, "add up"),
                            ("no steps", dict(rec, steps=[]), "without steps")):
        with open(path, "w") as f:
            json.dump(doc, f)
        rc, _, se = run("viz", path, "-o", os.path.join(tmp, "bad_cats.html"))
        check(rc == 2 and text in se and len(se.strip().splitlines()) == 1, "%s: status 2, one line: %r" % (what, se))
    no_leftovers(tmp, "categories")


def find_browser():
    for b in (os.environ.get("VRAM_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if b and shutil.which(b):
            return shutil.which(b)
    return None


def selftest(browser, page, fragment="selftest"):
    """The page's self-test result (a dict) and the browser's own log."""
    url = "file://" + os.path.abspath(page) + "#" + fragment
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1100",
                        "--virtual-time-budget=60000", "--enable-logging=stderr", "--v=0", "--dump-dom", url],
                       capture_output=True, timeout=300)
    dom, log = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    m = re.search(r'<pre id="vram-selftest"[^>]*>([^<]*)</pre>', dom)
    if not check(m is not None and m.group(1).strip(), "the page ran its self-test (%s)" % os.path.basename(page)):
        print(log[-3000:], file=sys.stderr)
        return None, log
    return json.loads(html.unescape(m.group(1))), log


def common(res, log, what, every_moment=True):
    """Checks every self-test shares; every_moment: each moment can be hovered on its own (on the
    events axis; on the wall-time axis, moments of the same microsecond share a column)."""
    check(res.get("exception") is None, "%s: the self-test ran through: %s" % (what, res.get("exception")))
    check(res.get("errors") == [], "%s: no error on the page: %s" % (what, (res.get("errors") or [])[:3]))
    console = [l for l in log.splitlines() if "CONSOLE" in l and ("Uncaught" in l or "rror" in l)]
    check(not console, "%s: no error on the browser's console: %s" % (what, console[:3]))
    check(res["zoom"]["width"] < 0.2, "%s: the wheel zoomed in (window %.3f of the run)" % (what, res["zoom"]["width"]))
    check(res["pan"]["moved"] != 0, "%s: dragging panned" % what)
    for r in res["runs"] if every_moment else []:
        check(r["reachable"]["missing"] == 0 and r["reachable"]["to"] > r["reachable"]["from"] or r["N"] == 0,
              "%s: every moment of a zoomed-in window can be hovered: %s" % (what, r["reachable"]))
    for r in res["runs"]:
        for m in r["moments"]:
            if every_moment:
                check(m["hovered"] == m["moment"] and m["layoutMoment"] == m["moment"],
                  "%s: hovering and clicking moment %s shows it (%s, layout %s)" % (what, m["moment"], m["hovered"], m["layoutMoment"]))
            check(m["layoutAllocated"] == m["allocated"] and m["layoutReserved"] == m["reserved"],
                  "%s: the allocator's layout at moment %s adds up to the timeline's figures" % (what, m["moment"]))
            check(re.search(r"allocated [0-9.]+ (GiB|MiB|KiB) \([0-9,]+ bytes\)", m["readout"]) is not None,
                  "%s: the readout names its unit and gives the exact bytes: %r" % (what, m["readout"][:200]))


def requested_after(trace_text, moments):
    """Requested bytes live after each of the given numbers of events, from the trace's text."""
    live, cur, n, out = {}, 0, 0, {}
    want = set(moments)
    if 0 in want:
        out[0] = 0
    for line in trace_text.splitlines():
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if f[0] == "a":
            live[f[1]] = int(f[2])
            cur += int(f[2])
        else:
            cur -= live.pop(f[1])
        n += 1
        if n in want:
            out[n] = cur
    return out


def browser_trace(browser, tmp):
    rc, so, se = run("replay", "--json", TRACE)
    peaks = json.loads(so.splitlines()[0])
    snap = os.path.join(tmp, "peak.json")
    rc, _, se = run("replay", "--snapshot", snap, TRACE)
    at = int(re.search(r"snapshot at event (\d+)", se).group(1))
    s = json.load(open(snap))
    snap_alloc = sum(b["size"] for g in s["segments"] for b in g["blocks"] if b["state"] == "active_allocated")
    snap_res = sum(g["total_size"] for g in s["segments"])
    with gzip.open(TRACE, "rt") as f:
        text = f.read()
    chosen = [0, 1, 1000, 5000, at + 1, 18077]
    req = requested_after(text, chosen)
    page, png = os.path.join(tmp, "trace.html"), os.path.join(tmp, "trace.png")
    rc, so, se = run("viz", TRACE, "-o", page, "--png", png)
    check(rc == 0, "vram viz --png: status 0 (%s)" % se.strip())
    res, log = selftest(browser, page, "selftest&m0=" + ",".join(map(str, chosen)))
    if not res:
        return
    common(res, log, "trace")
    r = res["runs"][0]
    check(r["drawnPeakAllocated"] == peaks["peak_allocated_bytes"],
          "the drawn peak of allocated memory is vram replay's: %s vs %s" % (r["drawnPeakAllocated"], peaks["peak_allocated_bytes"]))
    check(r["drawnPeakReserved"] == peaks["peak_reserved_bytes"],
          "the drawn peak of reserved memory is vram replay's: %s vs %s" % (r["drawnPeakReserved"], peaks["peak_reserved_bytes"]))
    by = {m["moment"]: m for m in r["moments"]}
    check(by[at + 1]["allocated"] == snap_alloc and by[at + 1]["reserved"] == snap_res,
          "after event %d the page shows the snapshot's sums: %s/%s vs %s/%s" % (at, by[at + 1]["allocated"], by[at + 1]["reserved"], snap_alloc, snap_res))
    for m in chosen:
        check(by[m]["requested"] == req[m], "requested bytes after %d events: page %s, trace %s" % (m, by[m]["requested"], req[m]))
    check(by[0]["allocated"] == 0 and by[0]["reserved"] == 0, "nothing allocated before the first event")
    with open(png, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (1400, 1100) and os.path.getsize(png) > 20000,
          "--png made a 1400x1100 picture of the page")


def browser_steps(browser, tmp):
    page = os.path.join(tmp, "steps.html")
    rc, _, se = run("viz", STEPS_TRACE, "-o", page)
    check(rc == 0, "a trace with step marks draws: %s" % se.strip())
    with gzip.open(STEPS_TRACE, "rt") as f:
        marks = sum(1 for l in f if l.startswith("# workload:") or l.startswith("# sync:"))
    res, log = selftest(browser, page)
    if res:
        common(res, log, "steps")
        check(len(res["runs"][0]["meta"]["steps"]) == marks > 0, "every step mark is drawn (%d)" % marks)


def browser_categories(browser, tmp):
    page, path = os.path.join(tmp, "cats_b.html"), os.path.join(tmp, "cats_b.json")
    with open(path, "w") as f:
        json.dump(categories_record(), f)
    rc, _, se = run("viz", path, "-o", page)
    check(rc == 0, "categories page: %s" % se.strip())
    res, log = selftest(browser, page)
    if res:
        common(res, log, "categories")


def browser_snapshots(browser, tmp):
    hist = os.path.join(tmp, "hist.json")
    env = dict(os.environ, VRAM_ALLOC_CONF="history:3000")
    run("replay", "--snapshot", hist, TRACE, env=env)
    bare = os.path.join(tmp, "bare.json")
    run("replay", "--snapshot", bare, os.path.join(SRC, "traces", "resnet50_train.trace.gz"))
    pkl = os.path.join(tmp, "torch_snapshot.pickle")
    with open(pkl, "wb") as f:
        pickle.dump(torch_snapshot_pickle(), f)
    for name, path in (("snapshot with history", hist), ("snapshot without history", bare)):
        page = os.path.join(tmp, os.path.basename(path) + ".html")
        rc, _, se = run("viz", path, "-o", page)
        check(rc == 0, "%s draws: %s" % (name, se.strip()))
        s = json.load(open(path))
        res, log = selftest(browser, page, "selftest&m0=end")
        if not res:
            continue
        common(res, log, name)
        end = res["runs"][0]["moments"][0]
        check(end["allocated"] == sum(g["allocated_size"] for g in s["segments"]) and
              end["reserved"] == sum(g["total_size"] for g in s["segments"]),
              "%s: the figures at its end are its segments' sums" % name)
    page = os.path.join(tmp, "pickle.html")
    rc, so, se = torch_viz(pkl, hist, "-o", page)
    check(rc == 0, "python -m vram_torch viz draws a PyTorch pickle beside a snapshot: %s" % se.strip())
    res, log = selftest(browser, page, "selftest&m0=end,0&m1=end")
    if res:
        common(res, log, "pickle")
        r = res["runs"][0]
        check(r["name"] == "torch_snapshot.pickle" and r["N"] == 4, "the pickle's 4 allocs and frees are its events")
        end, start = r["moments"]
        check(end["allocated"] == 1048576 + 4194304 + 2097152 and end["reserved"] == 2097152 + 8388608,
              "the pickle's figures at its end are its segments' sums: %s %s" % (end["allocated"], end["reserved"]))
        check(start["reserved"] == 2097152 and start["allocated"] == 1048576,
              "before its history: one segment, one block (%s, %s)" % (start["reserved"], start["allocated"]))
    res, log = selftest(browser, page, "selftest&m0=end,0&m1=end&xaxis=time&group=frame")
    if res:
        common(res, log, "pickle, wall-time axis, stacked by top frame", every_moment=False)
        expect = [1048576, 5242880, 7340032, 8388608, 7340032]  # at each moment of the pickle's history
        for m in res["runs"][0]["moments"]:
            check(m["allocated"] == expect[m["hovered"]], "on the wall-time axis, moment %d shows %d: %s" % (m["hovered"], expect[m["hovered"]], m["allocated"]))
        check(res["groups"][0] == ["adam_step (train.py:30)", "linear (train.py:10)", "dropout (train.py:40)"],
              "stacked by top frame, largest at the peak first: %s" % res["groups"][0])
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1100",
                          "--virtual-time-budget=30000", "--dump-dom", "file://" + page], capture_output=True, timeout=300).stdout.decode()
    check('id="cmp-totals"' in dom and "torch_snapshot.pickle" in dom and "linear (train.py:10)" in dom,
          "two inputs are compared, stacks by their frames")


def main():
    tmp = tempfile.mkdtemp(prefix="viz_check.")
    try:
        if PART == "inputs":
            bad_inputs(tmp)
            page_properties(tmp)
            meta_and_escaping(tmp)
            categories_input(tmp)
        else:
            browser = find_browser()
            if not browser:
                print("viz_check: SKIPPED: no Chromium here, and tests/install_chromium.sh could not install it")
                return 77
            browser_trace(browser, tmp)
            browser_steps(browser, tmp)
            browser_snapshots(browser, tmp)
            browser_categories(browser, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return done("viz_check " + PART)


if __name__ == "__main__":
    sys.exit(main())

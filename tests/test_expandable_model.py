"""test_expandable_model.py — bench/expandable_model.py against PyTorch itself: on every bundled
trace whose header records the peak reserved bytes that PyTorch's expandable segments reached on
the H200, the model must reach the same bytes exactly (it is the reference vram's placement is
compared with), and a missing trace must be an error, not a crash."""
import gzip
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "bench"))
import expandable_model  # noqa: E402

fails = checked = 0
traces = os.path.join(root, "traces")
for name in sorted(os.listdir(traces)):
    if not name.endswith(".trace.gz"):
        continue
    path = os.path.join(traces, name)
    header = {}
    with gzip.open(path, "rt") as f:
        for line in f:
            if not line.startswith("#"):
                break
            if ":" in line:
                k, v = line[1:].split(":", 1)
                header[k.strip()] = v.strip()
    want = header.get("pytorch_expandable_segments_peak_reserved_bytes")
    if want is None:
        continue
    reserved, requested = expandable_model.replay(path, 20 << 20)
    checked += 1
    if reserved != int(want) or requested != int(header["peak_requested_bytes"]):
        fails += 1
        print("FAIL: %s: model %d / %d bytes, PyTorch %s / %s" % (name, reserved, requested, want,
                                                                header["peak_requested_bytes"]))
if checked < 4:
    fails += 1
    print("FAIL: only %d traces carry PyTorch's expandable peak" % checked)
r = subprocess.run([sys.executable, os.path.join(root, "bench", "expandable_model.py"), "/nonexistent.trace.gz"],
                   capture_output=True, text=True)
if (r.returncode != 1 or not r.stderr.startswith("expandable_model: /nonexistent.trace.gz:")
        or "Traceback" in r.stderr):
    fails += 1
    print("FAIL: a missing trace: status %d, stderr %r" % (r.returncode, r.stderr))
print("%d traces checked, %d failed" % (checked, fails))
sys.exit(1 if fails else 0)

#!/usr/bin/env python3
"""smi_gpu_compare.py — reads the raw files bench/smi_gpu_check.sh wrote and compares
`vram smi` with nvidia-smi field by field (within 1 MiB of the reading taken just before or
just after it), checks the JSON, Prometheus and HTTP outputs, and works out the CPU cost of
`vram smi -l 1`. Writes OUTDIR/report.md (table + raw outputs) and prints the table.

usage: smi_gpu_compare.py OUTDIR HOLD_MIB CPU_SAMPLES
"""
import json
import os
import platform
import sys

out, hold_mib, cpu_samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
raw = os.path.join(out, "raw")


def read(name):
    try:
        with open(os.path.join(raw, name)) as f:
            return f.read()
    except OSError as e:
        return f"(missing: {e})"


def rows(name):
    res = []
    for line in read(name).splitlines():
        if line.strip():
            res.append([c.strip() for c in line.split(",")])
    return res


def num(s):
    try:
        return float(s)
    except ValueError:
        return None


lines = []
ok_all = True


def check(what, nv_before, vram, nv_after):
    global ok_all
    vals = [v for v in (nv_before, nv_after) if v is not None]
    if vram is None or not vals:
        ok = False
        diff = "n/a"
    else:
        d = min(abs(vram - v) for v in vals)
        ok = d <= 1.0
        diff = f"{d:.0f}"
    ok_all &= ok
    fmt = lambda v: "N/A" if v is None else f"{v:.0f}"
    lines.append(f"| {what} | {fmt(nv_before)} | {fmt(vram)} | {fmt(nv_after)} | {diff} | {'yes' if ok else 'NO'} |")


lines.append("| field (MiB) | nvidia-smi before | vram smi | nvidia-smi after | diff | within 1 MiB |")
lines.append("|---|---|---|---|---|---|")
before, mine, after = rows("nvsmi_gpu_before.csv"), rows("vram_gpu.csv"), rows("nvsmi_gpu_after.csv")
for i, r in enumerate(mine):
    b = before[i] if i < len(before) else [None] * 5
    a = after[i] if i < len(after) else [None] * 5
    for col, name in ((2, "memory.used"), (3, "memory.reserved"), (4, "memory.total")):
        check(f"GPU {r[0]} {name}", num(b[col] or ""), num(r[col]), num(a[col] or ""))
    if r[1] != b[1]:
        ok_all = False
        lines.append(f"| GPU {r[0]} uuid differs: {r[1]} vs {b[1]} | | | | | NO |")

apps_b = {r[0]: num(r[1]) for r in rows("nvsmi_apps_before.csv") if len(r) == 2}
apps_a = {r[0]: num(r[1]) for r in rows("nvsmi_apps_after.csv") if len(r) == 2}
apps_v = {r[0]: num(r[1]) for r in rows("vram_apps.csv") if len(r) == 2}
holder_pid = read("holder.txt").split()[0] if read("holder.txt").split() else "?"
for pid in sorted(set(apps_b) | set(apps_v) | set(apps_a)):
    tag = " (the holder)" if pid == holder_pid else ""
    check(f"pid {pid}{tag} used_memory", apps_b.get(pid), apps_v.get(pid), apps_a.get(pid))
if not apps_b and not apps_v:
    lines.append("| (no compute processes listed by either: NVML gives no process list in this sandbox) | | | | | |")
holder_seen = holder_pid in apps_v
held = apps_v.get(holder_pid)

# JSON, Prometheus, HTTP
notes = []
try:
    j = json.loads(read("sample.json"))
    notes.append(f"--json parses: {len(j['gpus'])} GPU(s), driver {j['driver_version']}, "
                 f"GPU 0 memory_used_bytes {j['gpus'][0]['memory_used_bytes']}")
except Exception as e:  # noqa: BLE001
    ok_all = False
    notes.append(f"--json does NOT parse: {e}")
http = read("http.txt")
status, _, body = http.partition("\n")
good = status.startswith("200 text/plain; version=0.0.4") and "vram_gpu_memory_used_bytes{" in body
ok_all &= good
notes.append(f"--listen 127.0.0.1:0 answered urllib: '{status}', {body.count(chr(10))} lines: {'yes' if good else 'NO'}")
try:
    from prometheus_client.parser import text_string_to_metric_families
    for what, text in (("--prometheus", read("metrics.prom")), ("HTTP /metrics", body)):
        fams = list(text_string_to_metric_families(text))
        notes.append(f"{what} parses with prometheus_client: {len(fams)} families, "
                     f"{sum(len(f.samples) for f in fams)} samples")
except ImportError:
    notes.append("prometheus_client not installed: exposition text not parsed here")
except Exception as e:  # noqa: BLE001
    ok_all = False
    notes.append(f"Prometheus text does NOT parse: {e}")
refuse = read("refuse.txt")
ok_refuse = "refusing to listen" in refuse and refuse.strip().endswith("exit 2")
ok_all &= ok_refuse
notes.append(f"--listen 0.0.0.0:0 refused with exit 2: {'yes' if ok_refuse else 'NO'}")
nolib = read("nolib.txt")
ok_nolib = nolib.strip().endswith("exit 2") and nolib.count("\n") == 2
ok_all &= ok_nolib
notes.append(f"missing library: one line and exit 2: {'yes' if ok_nolib else 'NO'}")

# CPU
cpu = read("cpu_times.txt").splitlines()
try:
    wall = float(read("cpu_end")) - float(read("cpu_start"))

    def sec(t):
        m, s = t.rstrip("s").split("m")
        return float(m) * 60 + float(s)

    u, s = cpu[1].split()[:2]
    used = sec(u) + sec(s)
    pct = 100 * used / wall
    notes.append(f"CPU of `vram smi -l 1 --count {cpu_samples}` on the real driver: user {sec(u)*1000:.0f} ms + "
                 f"sys {sec(s)*1000:.0f} ms over {wall:.1f} s wall = {pct:.3f} % of one core "
                 f"({'under' if pct < 1 else 'OVER'} 1 %)")
    ok_all &= pct < 1
except Exception as e:  # noqa: BLE001
    notes.append(f"CPU measurement unreadable: {e} ({cpu})")

head = [f"machine: {platform.node()} {platform.platform()}",
        f"holder: pid {holder_pid}, {hold_mib} MiB requested with torch.empty on cuda:0; "
        f"vram smi lists it: {'yes, ' + str(held) + ' MiB' if holder_seen else 'no'}",
        ""]
table = "\n".join(head + lines + [""] + ["- " + n for n in notes] + ["", f"ALL OK: {'yes' if ok_all else 'NO'}"])
print(table)
with open(os.path.join(out, "report.md"), "w") as f:
    f.write("# vram smi vs nvidia-smi on the GPU machine\n\n" + table + "\n\n## Raw outputs\n")
    for name in sorted(os.listdir(raw)):
        f.write(f"\n### {name}\n\n```\n{read(name)}\n```\n")
sys.exit(0 if ok_all else 1)

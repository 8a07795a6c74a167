"""make_variants.py — the GPT-2 sampling traces of 2026-12-04-sampling-sensitivity.md, rebuilt.

    python3 make_variants.py OUTDIR      (run from the repository root)

Writes to OUTDIR:
  alone_ws_first.trace   traces/recorded/gpt2_generate_h200.trace.gz with its cuBLAS workspace
                         (32 MiB) and the 1 MiB block allocated first instead of at event 195
  alone_extra_ws.trace   the same trace with one more 32 MiB block allocated first, live throughout
  alone_both.trace       both changes
  inprocess.trace        the gpt2_generate part of traces/recorded/workloads_h200.trace.gz, the
                         blocks the training programs before it left allocated placed first
  inprocess_nozero.trace the same without its zero-byte requests
It also checks that, zero-byte requests and the workspace allocations aside, the two recordings
make the same requests in the same order.
"""
import gzip
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
alone = [l for l in gzip.open("traces/recorded/gpt2_generate_h200.trace.gz", "rt").read().split("\n")
         if l.strip() and not l.startswith("#")]
ws = [i for i, l in enumerate(alone[:2000]) if l.split()[0] == "a" and l.split()[2] in ("33554432", "1048576")]
assert len(ws) == 2, ws
moved = [alone[i] for i in ws]
rest = [l for i, l in enumerate(alone) if i not in ws]
extra = ["a 9000001 33554432 0"]


def write(name, body):
    with open(os.path.join(out, name), "w") as f:
        f.write("\n".join(["# memtrace v1"] + body) + "\n")


write("alone_ws_first.trace", moved + rest)
write("alone_extra_ws.trace", extra + alone)
write("alone_both.trace", extra + moved + rest)

whole = gzip.open("traces/recorded/workloads_h200.trace.gz", "rt").read().split("\n")
start = [i for i, l in enumerate(whole) if l.startswith("# workload: gpt2_generate")][0]
live, order = {}, []
for l in whole[:start]:
    p = l.split()
    if p and p[0] == "a":
        live[p[1]] = l
        order.append(p[1])
    elif p and p[0] == "f":
        live.pop(p[1], None)
left = [live[i] for i in order if i in live]
gen = [l for l in whole[start + 1:] if l.strip()]
write("inprocess.trace", left + gen)
zero = {l.split()[1] for l in gen if l.startswith("a ") and l.split()[2] == "0"}
nozero = [l for l in gen if not (l.split()[0] in ("a", "f") and l.split()[1] in zero)]
write("inprocess_nozero.trace", left + nozero)


def sizes(lines):
    size, seq = {}, []
    for l in lines:
        p = l.split()
        if not p or p[0] not in ("a", "f"):
            continue
        if p[0] == "a":
            size[p[1]] = p[2]
            if p[2] != "0":
                seq.append(("a", p[2]))
        elif size.get(p[1], "0") != "0":
            seq.append(("f", size[p[1]]))
    return seq


same = sizes(rest) == sizes(gen)
print("leftovers placed first:", [l.split()[2] for l in left])
print("zero-byte requests in the in-process recording:", len(zero))
print("same requests in the same order (workspace and zero-byte requests aside):", same)
sys.exit(0 if same else 1)

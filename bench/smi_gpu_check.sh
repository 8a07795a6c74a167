#!/usr/bin/env bash
# smi_gpu_check.sh — the GPU acceptance check of `vram smi`: while a program holds a known
# amount of device memory, `vram smi --csv` must agree with nvidia-smi's
# --query-gpu=memory.used,memory.total and --query-compute-apps=pid,used_memory within 1 MiB,
# read in the same run (nvidia-smi is read just before and just after vram smi).
#
# Also, on the real driver: the CPU cost of `vram smi -l 1` over a minute (60 samples, run
# alongside), the JSON and Prometheus outputs parsed (prometheus_client's parser when present),
# and the HTTP endpoint asked on 127.0.0.1.
#
# usage: bench/smi_gpu_check.sh [VRAM_BINARY] [OUTDIR]     (HOLD_MIB=3072 by default)
# Writes OUTDIR/report.md (the comparison table and every raw output) and prints the table.
# Needs: an NVIDIA GPU and driver, nvidia-smi, python3 with torch (the holder).
set -uo pipefail
VRAM=$(readlink -f "${1:-build/vram}")
OUT=${2:-/tmp/smi_gpu_check}
HOLD_MIB=${HOLD_MIB:-3072}
CPU_SAMPLES=${CPU_SAMPLES:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/raw"
command -v nvidia-smi >/dev/null || { echo "smi_gpu_check: nvidia-smi not found" >&2; exit 2; }
[ -x "$VRAM" ] || { echo "smi_gpu_check: no vram binary at $VRAM (build it first)" >&2; exit 2; }

# 1. The holder: allocates HOLD_MIB MiB on GPU 0 with torch, touches it, prints its pid, waits.
# HOLDER_CMD replaces it for a dry run without a GPU (it must print its pid first).
if [ -n "${HOLDER_CMD:-}" ]; then
    bash -c "$HOLDER_CMD" > "$OUT/raw/holder.txt" 2> "$OUT/raw/holder.err" &
else
    python3 -c "
import os, time, torch
x = torch.empty($HOLD_MIB * 2**20, dtype=torch.uint8, device='cuda:0')
x.fill_(1); torch.cuda.synchronize()
print(os.getpid(), torch.cuda.memory_reserved(0), flush=True)
time.sleep(900)
" > "$OUT/raw/holder.txt" 2> "$OUT/raw/holder.err" &
fi
HOLDER=$!
trap 'kill $HOLDER 2>/dev/null' EXIT
for _ in $(seq 1 1200); do [ -s "$OUT/raw/holder.txt" ] && break; sleep 0.1; done
[ -s "$OUT/raw/holder.txt" ] || { echo "smi_gpu_check: the holder did not start:" >&2; cat "$OUT/raw/holder.err" >&2; exit 1; }
sleep 1

# 2. CPU cost of `vram smi -l 1`, alongside the rest (bash's `times`: the child's user and sys).
date +%s.%N > "$OUT/raw/cpu_start"
( bash -c "\"$VRAM\" smi -l 1 --count $CPU_SAMPLES > /dev/null; times" > "$OUT/raw/cpu_times.txt" 2>&1
  date +%s.%N > "$OUT/raw/cpu_end" ) &
CPU=$!

# 3. The same run: nvidia-smi, vram smi, nvidia-smi, for the GPUs and for the processes.
Q=index,uuid,memory.used,memory.reserved,memory.total
F=--format=csv,noheader,nounits
nvidia-smi --query-gpu=$Q $F > "$OUT/raw/nvsmi_gpu_before.csv" 2>&1
"$VRAM" smi --query-gpu=$Q $F > "$OUT/raw/vram_gpu.csv" 2>&1
nvidia-smi --query-gpu=$Q $F > "$OUT/raw/nvsmi_gpu_after.csv" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory $F > "$OUT/raw/nvsmi_apps_before.csv" 2>&1
"$VRAM" smi --query-compute-apps=pid,used_memory $F > "$OUT/raw/vram_apps.csv" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory $F > "$OUT/raw/nvsmi_apps_after.csv" 2>&1
# The shapes with headers and units, side by side.
nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv > "$OUT/raw/nvsmi_header.csv" 2>&1
"$VRAM" smi --query-gpu=index,memory.used,memory.total --format=csv > "$OUT/raw/vram_header.csv" 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$OUT/raw/nvsmi_apps_header.csv" 2>&1
"$VRAM" smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$OUT/raw/vram_apps_header.csv" 2>&1
# The other outputs on the real driver.
"$VRAM" smi > "$OUT/raw/table.txt" 2>&1
"$VRAM" smi --csv > "$OUT/raw/default.csv" 2>&1
"$VRAM" smi --json > "$OUT/raw/sample.json" 2>&1
"$VRAM" smi --prometheus > "$OUT/raw/metrics.prom" 2>&1
"$VRAM" smi --listen 127.0.0.1:0 2> "$OUT/raw/listen.err" &
LISTEN=$!
for _ in $(seq 1 100); do grep -q /metrics "$OUT/raw/listen.err" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*/metrics' "$OUT/raw/listen.err" | head -1)
python3 -c "import sys, urllib.request; r = urllib.request.urlopen(sys.argv[1], timeout=5); print(r.status, r.headers['Content-Type']); sys.stdout.write(r.read().decode())" "$URL" > "$OUT/raw/http.txt" 2>&1
kill -TERM $LISTEN; wait $LISTEN; echo "listen exit $?" >> "$OUT/raw/listen.err"
"$VRAM" smi --listen 0.0.0.0:0 > "$OUT/raw/refuse.txt" 2>&1; echo "exit $?" >> "$OUT/raw/refuse.txt"
VRAM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$VRAM" smi > "$OUT/raw/nolib.txt" 2>&1; echo "exit $?" >> "$OUT/raw/nolib.txt"
nvidia-smi > "$OUT/raw/nvidia-smi.txt" 2>&1

wait $CPU
kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
python3 "$HERE/smi_gpu_compare.py" "$OUT" "$HOLD_MIB" "$CPU_SAMPLES"

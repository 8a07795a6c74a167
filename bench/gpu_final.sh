#!/usr/bin/env bash
# gpu_final.sh — the whole GPU session in one go (run from the repository root on the GPU
# machine, $OUT set): bench/run_gpu.sh (build, CPU and GPU tests, allocator latency against
# PyTorch's allocators, the four workloads under native / vram / expandable segments), then
# traces of four workloads the allocator was never tuned on (bench/extra_workloads.py), recorded
# with PyTorch's own allocator, gzipped for `vram replay --fit` on any machine.
set -u
export OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
extra=$(mktemp -d)
for w in vit_train llama_train t5_varlen_train effnet_infer; do
  timeout 90 python3 -m vram_torch record -o "$extra/$w.trace" bench/extra_workloads.py "$w" 3 > "$extra/$w.log" 2>&1
  echo "record $w rc=$? $(grep -c '^a ' "$extra/$w.trace" 2>/dev/null) allocations"; tail -2 "$extra/$w.log"
  gzip -9 "$extra/$w.trace" 2>/dev/null
done
KINDS=${KINDS:-native vram expandable} STEPS=${STEPS:-6} bash bench/run_gpu.sh "$@"
mv "$extra"/*.trace.gz "$OUT"/ 2>/dev/null
tar -C "$extra" -czf "$OUT/extra-logs.tgz" . 2>/dev/null
ls -la "$OUT"

#!/usr/bin/env bash
# gpu_policy.sh — one GPU session for the pages model's policy: what mapping calls cost while
# the GPU is busy (bench_cuda_pages), then the four PyTorch workloads under native and under
# vram with each VRAM_ALLOC_CONF given, device calls per step included. Logs under $OUT.
#   KINDS="native vram vram:reserve_slack:0.02" STEPS=8 bench/gpu_policy.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; git log --oneline -1 2>/dev/null; } > "$OUT/machine.txt" 2>&1
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram_torch bench_cuda_pages bench_alloc_latency >> "$OUT/build.log" 2>&1 ||
  { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
export VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
./b/bench/bench_cuda_pages cuda:0 > "$OUT/pages.log" 2>&1; echo "bench_cuda_pages rc=$?"
for k in ${KINDS:-native vram}; do
  f=$(echo "$k" | tr ':,' '__')
  PYTHONUNBUFFERED=1 timeout ${WL_TIMEOUT:-200} python3 bench/torch_workloads.py --alloc "$k" --steps ${STEPS:-8} \
    --out "$OUT/wl_$f.json" > "$OUT/wl_$f.log" 2>&1; echo "workloads $k rc=$?"; grep -E "Error|error" "$OUT/wl_$f.log" | tail -3
done
python3 bench/torch_workloads.py --report "$OUT"/wl_*.json > "$OUT/workloads.md"
sed -n '/while a kernel spins/,$p' "$OUT/pages.log"
cat "$OUT/workloads.md"

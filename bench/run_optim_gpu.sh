#!/usr/bin/env bash
# run_optim_gpu.sh — the optimizer step's vector list kernels (issue 38; cuda_optim_list.cuh), one
# call of about 4 minutes on an H100: builds vram, the GPU tests and bench_optim; runs the list
# kernels' GPU test (both forms against a double reference) and the GPU op tests (the optimizers
# against the CPU); bench_optim (both forms at GPT-2 124M's 148 shapes, medians and GB/s); then
# ROUNDS rounds of vram bf16 with kept weights, GPT-2 124M B=8 T=1024 AdamW with clipping, 30
# steps each, the default (vec) and VRAM_OPTIM_KERNEL=old alternating, and a kernel profile of
# each. Logs under $OUT (or ./gpu-out); a table last.
#   ROUNDS=2 bench/run_optim_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; git log -1 --oneline 2>/dev/null; } \
  > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram gpu_test_gpu_optim_list gpu_test_gpu_ops bench_optim test_optim_emulated \
    >> "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
D=b/data/kjv.txt

for t in tests/test_optim_emulated tests/gpu_test_gpu_optim_list; do
  timeout 120 b/$t > "$OUT/$(basename $t).log" 2>&1
  echo "$(basename $t) rc=$?: $(tail -1 "$OUT/$(basename $t).log")"
  grep -E "FAIL|bit for bit" "$OUT/$(basename $t).log" | head -12
done
timeout 200 b/tests/gpu_test_gpu_ops 1 > "$OUT/gpu_ops.log" 2>&1
echo "gpu_test_gpu_ops 1 rc=$?: $(tail -1 "$OUT/gpu_ops.log")"
grep -E "FAIL" "$OUT/gpu_ops.log" | head -8

timeout 120 b/bench/bench_optim --rounds 30 > "$OUT/bench_optim.log" 2>&1
echo "bench_optim rc=$?"
cat "$OUT/bench_optim.log"

TRAIN=(train --device cuda:0 --model gpt2 --data $D --batch 8 --lr 3e-4 --precision bf16 --lowp-weights keep)
for ((r = 1; r <= ROUNDS; r++)); do
  for k in vec old; do
    VRAM_OPTIM_KERNEL=$k timeout 120 b/vram "${TRAIN[@]}" --steps 30 > "$OUT/speed_${k}_$r.log" 2>&1
    echo "VRAM_OPTIM_KERNEL=$k round $r rc=$?: $(grep -E '^summary' "$OUT/speed_${k}_$r.log")"
  done
done
for k in vec old; do
  VRAM_OPTIM_KERNEL=$k VRAM_CUDA_PROFILE=1 timeout 120 b/vram "${TRAIN[@]}" --steps 6 > "$OUT/profile_$k.log" 2>&1
  echo "profile VRAM_OPTIM_KERNEL=$k rc=$?"
  grep -E "vk_adam_update_list|vk_list_sum_squares" "$OUT/profile_$k.log"
done
echo
echo "| VRAM_OPTIM_KERNEL | ms/step by round | final train loss (round 1) | peak allocated |"
echo "|---|---|---|---:|"
for k in vec old; do
  ms=$(cat "$OUT"/speed_${k}_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' ')
  loss=$(sed -n 's/.*final train loss \([0-9.]*\).*/\1/p' "$OUT/speed_${k}_1.log" 2>/dev/null)
  pk=$(grep -h '^summary' "$OUT"/speed_${k}_*.log 2>/dev/null | tail -1 | sed -n 's/.*peak allocated \([0-9.]* MiB\).*/\1/p')
  echo "| $k | ${ms:-?} | ${loss:-?} | ${pk:-?} |"
done

#!/usr/bin/env bash
# run_optim_gpu.sh — the optimizer step's vector list kernels (issue 38; cuda_optim_list.cuh), one
# call of about 4 minutes on an H100: builds vram, the GPU tests and bench_optim; runs the list
# kernels' GPU test (both forms against a double reference) and the GPU op tests (the optimizers
# against the CPU); bench_optim (both forms at GPT-2 124M's 148 shapes, medians and GB/s); then
# ROUNDS rounds of vram bf16 with kept weights, GPT-2 124M B=8 T=1024 AdamW with clipping, 30
# steps each, VRAM_OPTIM_KERNEL=vec and =old alternating, and a kernel profile of
# each. Logs under $OUT (or ./gpu-out); a table last.
#   ROUNDS=2 bench/run_optim_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"
gpu_machine
gpu_build vram gpu_test_gpu_optim_list gpu_test_gpu_ops bench_optim test_optim_emulated

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

gpu_speed_rounds VRAM_OPTIM_KERNEL vec old
for k in vec old; do
  gpu_profile VRAM_OPTIM_KERNEL $k
  echo "profile VRAM_OPTIM_KERNEL=$k rc=$?"
  grep -E "vk_adam_update_list|vk_list_sum_squares" "$OUT/profile_$k.log"
done
echo
echo "| VRAM_OPTIM_KERNEL | ms/step by round | final train loss (round 1) | peak allocated |"
echo "|---|---|---|---:|"
for k in vec old; do
  ms=$(gpu_ms $k)
  loss=$(sed -n 's/.*final train loss \([0-9.]*\).*/\1/p' "$OUT/speed_${k}_1.log" 2>/dev/null)
  pk=$(gpu_peak $k)
  echo "| $k | ${ms:-?} | ${loss:-?} | ${pk:-?} |"
done

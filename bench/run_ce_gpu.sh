#!/usr/bin/env bash
# run_ce_gpu.sh — the fused classifier's register kernel (vk_cross_entropy_rows) and the bf16
# classifier backward without scaling passes (docs/runtime.md, Speed) on a GPU in one call, about
# 4 minutes on an H100: build; gpu_test_gpu_classifier (the kernel against a double reference and
# the old kernel, the fallbacks, loss.backward() against the CPU) and gpu_test_gpu_ops 1; the
# kernel microbenchmark (both kernels in one run); ROUNDS rounds of GPT-2 124M, B=8, T=1024, bf16,
# 30 steps, with VRAM_CE_KERNEL=old and =rows in turns; one 6-step kernel profile each way.
# Logs under $OUT (or ./gpu-out); a table last: ms/step by round, peak allocated (must not move
# between the two), the profile's cross-entropy and vk_scale_inplace rows per step.
#   ROUNDS=3 bench/run_ce_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"
gpu_machine
gpu_build vram gpu_test_gpu_classifier gpu_test_gpu_ops bench_classifier
gpu_need_corpus
timeout 300 b/tests/gpu_test_gpu_classifier > "$OUT/classifier.log" 2>&1
echo "gpu classifier rc=$?: $(grep -E 'passed' "$OUT/classifier.log" | tail -1)"
grep -E "FAIL" "$OUT/classifier.log" | head -12
timeout 300 b/tests/gpu_test_gpu_ops 1 > "$OUT/ops.log" 2>&1
echo "gpu ops rc=$?: $(grep -E 'passed' "$OUT/ops.log" | tail -1)"
grep -E "FAIL" "$OUT/ops.log" | head -12
timeout 120 b/bench/bench_classifier > "$OUT/bench_classifier.log" 2>&1
echo "bench_classifier rc=$?"
cat "$OUT/bench_classifier.log"
gpu_speed_rounds VRAM_CE_KERNEL old rows
for k in old rows; do
  gpu_profile VRAM_CE_KERNEL $k
  echo "profile VRAM_CE_KERNEL=$k rc=$?"
done
echo
echo "| VRAM_CE_KERNEL | ms/step by round | peak allocated | vk_cross_entropy_rows a step | vk_cross_entropy_fused a step | vk_scale_inplace a step |"
echo "|---|---|---:|---|---|---|"
for k in old rows; do
  ms=$(gpu_ms $k)
  pk=$(gpu_peak $k)
  echo "| $k | ${ms:-?} | ${pk:-?} | $(gpu_row "$OUT/profile_$k.log" vk_cross_entropy_rows) |" \
       "$(gpu_row "$OUT/profile_$k.log" vk_cross_entropy_fused) | $(gpu_row "$OUT/profile_$k.log" vk_scale_inplace) |"
done

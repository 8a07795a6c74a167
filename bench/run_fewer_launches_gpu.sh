#!/usr/bin/env bash
# run_fewer_launches_gpu.sh — VRAM_FEWER_LAUNCHES (docs/runtime.md) on a GPU in one call, about 3
# minutes on an H100: build; the GPU op tests (test_fewer_launches: the same losses and weights
# both ways, the memsets gone); ROUNDS rounds of GPT-2 124M, B=8, T=1024, bf16, AdamW,
# --lowp-weights keep, 30 steps, with the switch off (VRAM_FEWER_LAUNCHES=0) and on, in turns;
# then one 6-step kernel profile (VRAM_CUDA_PROFILE=1) each way. Logs under $OUT (or ./gpu-out);
# a table last: ms/step by round, peak allocated (must not move), the profile's copy/memset,
# accumulate and layer-norm rows per step.
#   ROUNDS=3 bench/run_fewer_launches_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"
gpu_machine
gpu_build vram gpu_test_gpu_ops
gpu_need_corpus
timeout 200 b/tests/gpu_test_gpu_ops 1 > "$OUT/ops.log" 2>&1
echo "gpu ops rc=$?: $(grep -E 'passed' "$OUT/ops.log" | tail -1)"
grep -E "FAIL|^fewer launches" "$OUT/ops.log" | head -12
gpu_speed_rounds VRAM_FEWER_LAUNCHES 0 1
for sw in 0 1; do
  gpu_profile VRAM_FEWER_LAUNCHES $sw
  echo "profile VRAM_FEWER_LAUNCHES=$sw rc=$?"
done
echo
echo "| VRAM_FEWER_LAUNCHES | ms/step by round | peak allocated | copy / memset a step | vk_accumulate a step | vk_layer_norm_mixed_backward_x a step |"
echo "|---|---|---:|---|---|---|"
for sw in 0 1; do
  ms=$(gpu_ms $sw)
  pk=$(gpu_peak $sw)
  echo "| $sw | ${ms:-?} | ${pk:-?} | $(gpu_row "$OUT/profile_$sw.log" 'copy / memset') | $(gpu_row "$OUT/profile_$sw.log" vk_accumulate) |" \
       "$(gpu_row "$OUT/profile_$sw.log" vk_layer_norm_mixed_backward_x) |"
done

#!/usr/bin/env bash
# run_ce_gpu.sh — the fused classifier's register kernel (vk_cross_entropy_rows) and the bf16
# classifier backward without scaling passes (docs/runtime.md, Speed) on a GPU in one call, about
# 4 minutes on an H100: build; gpu_test_gpu_classifier (the kernel against a double reference and
# the old kernel, the fallbacks, loss.backward() against the CPU) and gpu_test_gpu_ops 1; the
# kernel microbenchmark (both kernels in one run); ROUNDS rounds of GPT-2 124M, B=8, T=1024, bf16,
# 30 steps, with VRAM_CE_KERNEL=old and the default in turns; one 6-step kernel profile each way.
# Logs under $OUT (or ./gpu-out); a table last: ms/step by round, peak allocated (must not move
# between the two), the profile's cross-entropy and vk_scale_inplace rows per step.
#   ROUNDS=3 bench/run_ce_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; git log --oneline -1; } \
  > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram gpu_test_gpu_classifier gpu_test_gpu_ops bench_classifier \
  >> "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
D=b/data/kjv.txt
[ -s $D ] || { echo "no corpus at $D (the build copies data/kjv.txt.gz there)"; exit 1; }
timeout 300 b/tests/gpu_test_gpu_classifier > "$OUT/classifier.log" 2>&1
echo "gpu classifier rc=$?: $(grep -E 'passed' "$OUT/classifier.log" | tail -1)"
grep -E "FAIL" "$OUT/classifier.log" | head -12
timeout 300 b/tests/gpu_test_gpu_ops 1 > "$OUT/ops.log" 2>&1
echo "gpu ops rc=$?: $(grep -E 'passed' "$OUT/ops.log" | tail -1)"
grep -E "FAIL" "$OUT/ops.log" | head -12
timeout 120 b/bench/bench_classifier > "$OUT/bench_classifier.log" 2>&1
echo "bench_classifier rc=$?"
cat "$OUT/bench_classifier.log"
TRAIN=(train --device cuda:0 --model gpt2 --data $D --batch 8 --lr 3e-4 --precision bf16 --lowp-weights keep)
for ((r = 1; r <= ROUNDS; r++)); do
  for k in old rows; do
    VRAM_CE_KERNEL=$k timeout 120 b/vram "${TRAIN[@]}" --steps 30 > "$OUT/speed_${k}_$r.log" 2>&1
    echo "VRAM_CE_KERNEL=$k round $r rc=$?: $(grep -E '^summary' "$OUT/speed_${k}_$r.log")"
  done
done
for k in old rows; do
  VRAM_CE_KERNEL=$k VRAM_CUDA_PROFILE=1 timeout 120 b/vram "${TRAIN[@]}" --steps 6 > "$OUT/profile_$k.log" 2>&1
  echo "profile VRAM_CE_KERNEL=$k rc=$?"
done
# a profile row's launches and total ms, per step (6 steps)
row() { awk -v k="$2" 'index($0, k) { n = split($0, f, " "); for (i = 1; i <= n; i++) if (f[i] ~ /^[0-9]+$/) {
  printf "%.0f launches, %.3f ms", f[i] / 6, f[i + 1] / 6; exit } }' "$1"; }
echo
echo "| VRAM_CE_KERNEL | ms/step by round | peak allocated | vk_cross_entropy_rows a step | vk_cross_entropy_fused a step | vk_scale_inplace a step |"
echo "|---|---|---:|---|---|---|"
for k in old rows; do
  ms=$(cat "$OUT"/speed_${k}_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' ')
  pk=$(grep -h '^summary' "$OUT"/speed_${k}_*.log 2>/dev/null | tail -1 | sed -n 's/.*peak allocated \([0-9.]* MiB\).*/\1/p')
  echo "| $k | ${ms:-?} | ${pk:-?} | $(row "$OUT/profile_$k.log" vk_cross_entropy_rows) |" \
       "$(row "$OUT/profile_$k.log" vk_cross_entropy_fused) | $(row "$OUT/profile_$k.log" vk_scale_inplace) |"
done

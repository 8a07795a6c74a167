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
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; git log --oneline -1; } \
  > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram gpu_test_gpu_ops >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
D=b/data/kjv.txt
[ -s $D ] || { echo "no corpus at $D (the build copies data/kjv.txt.gz there)"; exit 1; }
timeout 200 b/tests/gpu_test_gpu_ops 1 > "$OUT/ops.log" 2>&1
echo "gpu ops rc=$?: $(grep -E 'passed' "$OUT/ops.log" | tail -1)"
grep -E "FAIL|^fewer launches" "$OUT/ops.log" | head -12
TRAIN=(train --device cuda:0 --model gpt2 --data $D --batch 8 --lr 3e-4 --precision bf16 --lowp-weights keep)
for ((r = 1; r <= ROUNDS; r++)); do
  for sw in 0 1; do
    VRAM_FEWER_LAUNCHES=$sw timeout 120 b/vram "${TRAIN[@]}" --steps 30 > "$OUT/speed_${sw}_$r.log" 2>&1
    echo "VRAM_FEWER_LAUNCHES=$sw round $r rc=$?: $(grep -E '^summary' "$OUT/speed_${sw}_$r.log")"
  done
done
for sw in 0 1; do
  VRAM_FEWER_LAUNCHES=$sw VRAM_CUDA_PROFILE=1 timeout 120 b/vram "${TRAIN[@]}" --steps 6 > "$OUT/profile_$sw.log" 2>&1
  echo "profile VRAM_FEWER_LAUNCHES=$sw rc=$?"
done
# a profile row's launches and total ms, per step (6 steps)
row() { awk -v k="$2" 'index($0, k) { n = split($0, f, " "); for (i = 1; i <= n; i++) if (f[i] ~ /^[0-9]+$/) {
  printf "%.0f launches, %.3f ms", f[i] / 6, f[i + 1] / 6; exit } }' "$1"; }
echo
echo "| VRAM_FEWER_LAUNCHES | ms/step by round | peak allocated | copy / memset a step | vk_accumulate a step | vk_layer_norm_mixed_backward_x a step |"
echo "|---|---|---:|---|---|---|"
for sw in 0 1; do
  ms=$(cat "$OUT"/speed_${sw}_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' ')
  pk=$(grep -h '^summary' "$OUT"/speed_${sw}_*.log 2>/dev/null | tail -1 | sed -n 's/.*peak allocated \([0-9.]* MiB\).*/\1/p')
  echo "| $sw | ${ms:-?} | ${pk:-?} | $(row "$OUT/profile_$sw.log" 'copy / memset') | $(row "$OUT/profile_$sw.log" vk_accumulate) |" \
       "$(row "$OUT/profile_$sw.log" vk_layer_norm_mixed_backward_x) |"
done

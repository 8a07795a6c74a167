#!/usr/bin/env bash
# run_grad_adopt_gpu.sh — VRAM_GRAD_ADOPT (docs/runtime.md, "Gradients by reference") on a GPU in
# one call. Parts (PARTS, default "test speed records"; about 4 minutes on an H100 after the build):
#   test     gpu_test_gpu_grad_adopt: a small bf16 GPT's gradients with the switch on against off
#            and against f32 on the CPU, both layer-norm backward paths and residual streams
#   speed    ROUNDS rounds of GPT-2 124M, B=8, T=1024, bf16, --lowp-weights keep, 30 steps, the
#            switch off and on in turns, then a 6-step kernel profile each way (VRAM_CUDA_PROFILE)
#   records  the planner's 15 GPU records measured again with the switch on (VRAM_GRAD_ADOPT=1), one
#            run at a time (tests/plan_gpu_check.py --measure), copied over
#            bench/results/2026-12-06-plan-gpu-records.json in this tree and checked there
#            (plan_gpu_check.py: the records against `vram plan`, the grid's still with the switch off)
#   grid     (not in the default: about 6 minutes) the 29-configuration grid measured again
#            (bench/plan_grid.py --device cuda, two trainings at a time) and checked
# Logs and the new records under $OUT (or ./gpu-out); commit $OUT/plan-gpu-records.json (and
# $OUT/plan_grid_gpu.json) as bench/results/2026-12-06-plan-gpu-records.json (-grid.json).
#   PARTS="test speed records" ROUNDS=2 bench/run_grad_adopt_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
PARTS=" ${PARTS:-test speed records} "
has() { [[ "$PARTS" == *" $1 "* ]]; }
mkdir -p "$OUT"
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"
gpu_machine
gpu_build vram gpu_test_gpu_grad_adopt
gpu_need_corpus
T0=$(date +%s)
if has test; then
  timeout 200 b/tests/gpu_test_gpu_grad_adopt > "$OUT/test.log" 2>&1
  echo "gpu_test_gpu_grad_adopt rc=$?: $(grep -E 'passed' "$OUT/test.log" | tail -1)"
  grep -E "FAIL|device copies" "$OUT/test.log" | head -12
fi
if has speed; then
  gpu_speed_rounds VRAM_GRAD_ADOPT 0 1
  for sw in 0 1; do
    gpu_profile VRAM_GRAD_ADOPT $sw
    echo "profile VRAM_GRAD_ADOPT=$sw rc=$?: $(grep -E 'copy / memset|vk_accumulate' "$OUT/profile_$sw.log" | tr -s ' ' | paste -sd';')"
  done
fi
if has records; then
  VRAM_GRAD_ADOPT=1 python3 tests/plan_gpu_check.py --measure b/vram $D "$OUT/plan-gpu-records.json" > "$OUT/records.log" 2>&1
  echo "records rc=$? ($(( $(date +%s) - T0 )) s so far)"; cat "$OUT/records.log"
  if grep -q '"grad_adopt": 1' "$OUT/plan-gpu-records.json" 2>/dev/null; then
    cp "$OUT/plan-gpu-records.json" bench/results/2026-12-06-plan-gpu-records.json
    python3 tests/plan_gpu_check.py b/vram > "$OUT/records_check.log" 2>&1
    echo "plan_gpu_check rc=$?"; grep -vE '^ok ' "$OUT/records_check.log" | tail -12
  fi
fi
if has grid; then
  timeout 480 python3 bench/plan_grid.py --device cuda --vram b/vram --data $D --steps 4 --jobs 2 \
    --json "$OUT/plan_grid_gpu.json" > "$OUT/grid.log" 2>&1
  echo "grid rc=$?"; tail -4 "$OUT/grid.log"
  python3 tests/plan_gpu_check.py b/vram "$OUT/plan_grid_gpu.json" > "$OUT/grid_check.log" 2>&1
  echo "grid check rc=$?"; grep -E 'FAIL|configurations' "$OUT/grid_check.log" | head -12
fi
echo "total $(( $(date +%s) - T0 )) s after the build"

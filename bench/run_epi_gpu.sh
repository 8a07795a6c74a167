#!/usr/bin/env bash
# run_epi_gpu.sh — two memory-bound costs of mixed-precision training taken out (issue 38), one
# call of under 4 minutes on an H100: builds vram and the GPU op tests, runs them once (the bias
# gradient from cuBLASLt's BGRADB epilogue and the one-kernel residual add + layer norm, bf16
# and f16, against the CPU's f32; it prints how many bias gradients came from the epilogue), then
# ROUNDS rounds of vram bf16 with kept weights, GPT-2 124M B=8 T=1024 AdamW, 30 steps each, in
# three forms:
#   on         both new paths (the default)
#   bgrad_off  VRAM_BGRAD_EPILOGUE=0: bias gradients by the column-sum kernel
#   off        VRAM_BGRAD_EPILOGUE=0 VRAM_FUSED_ADD_LN=0: the code before these changes
# then a 6-step kernel profile (VRAM_CUDA_PROFILE=1) of "on" and of "off", and the planner's
# prediction (vram plan --device cuda) beside the "on" run's measured peaks.
# Logs go to a temporary folder and are packed into $OUT/logs.tgz after every run (so that a
# cut-short call still brings them back); $OUT holds machine.txt, summary.txt and logs.tgz.
#   ROUNDS=2 bench/run_epi_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
L=$(mktemp -d)
pack() { tar -czf "$OUT/logs.tgz" -C "$L" . 2>/dev/null; }
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  git log -1 --oneline 2>/dev/null; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$L/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram gpu_test_gpu_ops >> "$L/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$L/build.log"; pack; exit 1; }
D=b/data/kjv.txt

timeout 100 b/tests/gpu_test_gpu_ops 1 > "$L/gpu_ops.log" 2>&1
say "gpu_test_gpu_ops 1 rc=$?: $(tail -1 "$L/gpu_ops.log")"
grep -E "FAIL|BGRADB|add_layer_norm" "$L/gpu_ops.log" | head -8 | tee -a "$OUT/summary.txt"
pack

TRAIN="--device cuda:0 --model gpt2 --data $D --batch 8 --steps 30 --lr 3e-4 --precision bf16 --lowp-weights keep"
run() { # NAME ROUND ENV...
  local name=$1 r=$2; shift 2
  env "$@" timeout 60 b/vram train $TRAIN > "$L/vram_${name}_$r.log" 2>&1
  say "vram [$name] round $r rc=$?: $(grep -E '^summary' "$L/vram_${name}_$r.log")"
  pack
}
for ((r = 1; r <= ROUNDS; r++)); do
  run on "$r" VRAM_BGRAD_EPILOGUE=1 VRAM_FUSED_ADD_LN=1
  run bgrad_off "$r" VRAM_BGRAD_EPILOGUE=0 VRAM_FUSED_ADD_LN=1
  run off "$r" VRAM_BGRAD_EPILOGUE=0 VRAM_FUSED_ADD_LN=0
done

prof() { # NAME ENV...
  local name=$1; shift
  env "$@" VRAM_CUDA_PROFILE=1 timeout 45 b/vram train $TRAIN --steps 6 > "$L/profile_$name.log" 2>&1
  say "profile $name rc=$?"
  grep -E "GPU time by kernel|cublasLt matmul|vk_column_sum_lowp|vk_layer_norm |vk_add_layer_norm|vk_binary|copy / memset|bias-gradient epilogue" \
    "$L/profile_$name.log" | head -9 | tee -a "$OUT/summary.txt"
  pack
}
prof on VRAM_BGRAD_EPILOGUE=1 VRAM_FUSED_ADD_LN=1
prof off VRAM_BGRAD_EPILOGUE=0 VRAM_FUSED_ADD_LN=0

# (the tree options the GPU runs place with, as tests/plan_gpu_check.py plans them)
VRAM_ALLOC_CONF=large_moves:False,chunk_divisor:0 timeout 30 b/vram plan --device cuda --model gpt2 --batch 8 \
  --precision bf16 --lowp-weights keep > "$L/plan.log" 2>&1
say "plan rc=$?: $(grep -E '^peak (allocated|reserved)' "$L/plan.log" | paste -sd';')"
pack

med() { cat "$L"/vram_$1_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' '; }
mid() { echo "$1" | tr ' ' '\n' | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
peaks() { grep -h '^summary' "$L/vram_$1_1.log" 2>/dev/null | sed -n 's/.*; \(peak allocated.*\)$/\1/p'; }
losses() { cat "$L"/vram_$1_*.log 2>/dev/null | sed -n 's/.*final train loss \([0-9.]*\).*/\1/p' | paste -sd' '; }
OFF=$(mid "$(med off)")
row() { # LABEL NAME
  local m; m=$(mid "$(med "$2")")
  say "| $1 | $(med "$2") | ${m:--} | $([ -n "$m" ] && [ -n "$OFF" ] && awk -v o="$OFF" -v v="$m" 'BEGIN {printf "%+.2f ms", v - o}') | $(losses "$2") | $(peaks "$2") |"
}
say ""
say "| run (bf16, --lowp-weights keep, GPT-2 124M B=8 T=1024) | ms/step by round | median | vs off | loss at step 30 | peaks (round 1) |"
say "|---|---|---|---|---|---|"
row "on: BGRADB bias gradients + one-kernel add/layer norm" on
row "bgrad_off: VRAM_BGRAD_EPILOGUE=0" bgrad_off
row "off: both off (the code before)" off
say "| vram plan --device cuda | | | | | $(grep -E '^peak (allocated|reserved)' "$L/plan.log" | awk '{print $2, $3, $4}' | paste -sd' ') |"
rm -rf "$L"

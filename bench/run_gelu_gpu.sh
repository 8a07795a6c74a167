#!/usr/bin/env bash
# run_gelu_gpu.sh — GPT-2's tanh GELU fused into cuBLASLt's epilogues (issue 38), one call of about
# 5 minutes on an H100: builds vram and the GPU op tests, runs them (the tanh GELU ops and the
# fused MLP in bf16 and f16 against the CPU's f32), then ROUNDS rounds of vram bf16 with kept
# weights, GPT-2 124M B=8 T=1024 AdamW, 30 steps each, in three forms:
#   erf            --activation gelu_erf: erf's GELU, separate kernels (the earlier default)
#   tanh fused     --activation gelu_tanh: GELU_AUX_BIAS in fc's product, DGELU in the gradient's
#   tanh unfused   the same model with VRAM_GELU_EPILOGUE=0: tanh GELU in separate kernels
# beside torch.compile on the same-layout model with the tanh GELU (bench/gpt2_torch.py), the
# planner's prediction for the fused run (vram plan --device cuda) beside its measured peaks, and
# a kernel profile of erf and of tanh fused. Logs under $OUT (or ./gpu-out); a table last.
#   ROUNDS=2 bench/run_gelu_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; git log -1 --oneline 2>/dev/null
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram gpu_test_gpu_ops >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
D=b/data/kjv.txt

timeout 150 b/tests/gpu_test_gpu_ops 1 > "$OUT/gpu_ops.log" 2>&1
echo "gpu_test_gpu_ops 1 rc=$?: $(tail -1 "$OUT/gpu_ops.log")"
grep -E "FAIL|tanh|epilogue" "$OUT/gpu_ops.log" | head -8

TRAIN="--device cuda:0 --model gpt2 --data $D --batch 8 --steps 30 --lr 3e-4 --precision bf16 --lowp-weights keep"
run() { # NAME ROUND ENV... -- FLAGS...
  local name=$1 r=$2; shift 2
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 120 b/vram train $TRAIN "$@" > "$OUT/vram_${name}_$r.log" 2>&1
  echo "vram [$name] round $r rc=$?: $(grep -E '^summary' "$OUT/vram_${name}_$r.log")"
}
for ((r = 1; r <= ROUNDS; r++)); do
  run erf "$r" VRAM_GELU_EPILOGUE=1 -- --activation gelu_erf
  run tanh_fused "$r" VRAM_GELU_EPILOGUE=1 -- --activation gelu_tanh
  run tanh_unfused "$r" VRAM_GELU_EPILOGUE=0 -- --activation gelu_tanh
done
timeout 240 python3 bench/gpt2_torch.py speed --precision bf16 --models same-compile --steps 25 --activation gelu_tanh \
  > "$OUT/torch.log" 2>&1
echo "torch.compile rc=$?: $(grep '^torch' "$OUT/torch.log")"

timeout 60 b/vram plan --device cuda --model gpt2 --batch 8 --precision bf16 --lowp-weights keep --activation gelu_tanh \
  > "$OUT/plan_tanh.log" 2>&1
echo "plan (tanh fused) rc=$?: $(grep -E '^peak (allocated|reserved)' "$OUT/plan_tanh.log" | paste -sd';')"

for a in gelu_erf gelu_tanh; do
  VRAM_CUDA_PROFILE=1 timeout 60 b/vram train $TRAIN --steps 6 --activation $a > "$OUT/profile_$a.log" 2>&1
  echo "profile $a rc=$?"
  grep -E "cublasLt matmul|vk_unary|GPU time by kernel|GELU epilogue" "$OUT/profile_$a.log" | head -6
done

med() { cat "$OUT"/vram_$1_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' '; }
mid() { echo "$1" | tr ' ' '\n' | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
peaks() { grep -h '^summary' "$OUT/vram_$1_1.log" 2>/dev/null | sed -n 's/.*; \(peak allocated.*\)$/\1/p'; }
TORCH=$(sed -n 's/.*compile *\([0-9.]*\) ms.*/\1/p' "$OUT/torch.log")
row() { # LABEL NAME
  local m; m=$(mid "$(med "$2")")
  echo "| $1 | $(med "$2") | ${m:--} | $([ -n "$m" ] && [ -n "$TORCH" ] && awk -v t="$TORCH" -v v="$m" 'BEGIN {printf "%.2fx", t / v}') | $(peaks "$2") |"
}
echo
echo "| run (bf16, --lowp-weights keep) | ms/step by round | median | speed vs torch.compile | peaks (round 1) |"
echo "|---|---|---|---|---|"
row "vram erf GELU, separate kernels" erf
row "vram tanh GELU, cuBLASLt epilogues" tanh_fused
row "vram tanh GELU, VRAM_GELU_EPILOGUE=0" tanh_unfused
echo "| torch.compile same-layout (tanh GELU) | ${TORCH:--} | | 1 | $(sed -n 's/.*\(peak allocated.*\)$/\1/p' "$OUT/torch.log") |"
echo "| vram plan --device cuda (tanh fused) | | | | $(grep -E '^peak (allocated|reserved)' "$OUT/plan_tanh.log" | awk '{print $2, $3, "MiB"}' | paste -sd' ') |"

#!/usr/bin/env bash
# run_speed_check_gpu.sh — a short round of issue 38's speed work in one call (about 4 minutes on
# an H100): the GPU op tests and the mixed-precision CTest cases, the GPU rows that
# tests/plan_gpu_check.py checks the planner against (re-recorded, three runs at a time), then
# ROUNDS rounds of vram bf16 with kept weights (recomputing GELU and layer norm, and not) beside
# torch.compile on the same-layout model (bench/gpt2_torch.py), GPT-2 124M B=8 T=1024 AdamW, and a
# kernel profile. Logs under $OUT (or ./gpu-out); a table last. The longer round with PyTorch
# eager and the 200-step loss checks is bench/run_mixed_speed_gpu.sh.
#   ROUNDS=2 bench/run_speed_check_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
D=b/data/kjv.txt
(cd b && timeout 200 ctest -R "gpu_test_gpu_ops|gpu_test_grad_scaler|gpu_cli_train_mixed" > "$OUT/ctest.log" 2>&1)
echo "GPU tests rc=$?"; grep -E "tests passed|Failed|FAIL" "$OUT/ctest.log" | head -5
timeout 150 python3 tests/plan_gpu_check.py --measure b/vram $D "$OUT/records.json" > "$OUT/records.log" 2>&1
echo "plan records rc=$?"
CONFIGS=("--lowp-weights keep" "--lowp-weights keep --recompute none")
for ((r = 1; r <= ROUNDS; r++)); do
  for v in "${CONFIGS[@]}"; do
    t=$(echo "$v" | tr -d ' -')
    timeout 120 b/vram train --device cuda:0 --model gpt2 --data $D --batch 8 --steps 30 --lr 3e-4 --precision bf16 $v \
      --report > "$OUT/vram_${t}_$r.log" 2>&1
    echo "vram [bf16 $v] round $r rc=$?: $(grep -E '^summary' "$OUT/vram_${t}_$r.log")"
  done
  timeout 200 python3 bench/gpt2_torch.py speed --precision bf16 --models same-compile --steps 25 > "$OUT/torch_$r.log" 2>&1
  echo "torch round $r rc=$?"; grep "^torch" "$OUT/torch_$r.log"
done
VRAM_CUDA_PROFILE=1 timeout 60 b/vram train --device cuda:0 --model gpt2 --data $D --batch 8 --steps 6 --precision bf16 \
  --lowp-weights keep > "$OUT/profile.log" 2>&1
echo "| run | ms/step by round |"; echo "|---|---|"
for v in "${CONFIGS[@]}"; do
  t=$(echo "$v" | tr -d ' -')
  echo "| vram bf16 $v | $(cat "$OUT"/vram_${t}_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' ') |"
done
echo "| torch.compile | $(grep -h "^torch" "$OUT"/torch_*.log | sed -n 's/.*compile *\([0-9.]*\) ms.*/\1/p' | paste -sd' ') |"
cat "$OUT/records.log"

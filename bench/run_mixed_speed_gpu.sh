#!/usr/bin/env bash
# run_mixed_speed_gpu.sh — issue 38's speed round in one call (about 6 minutes on an H100): the GPU
# op tests (flash attention and kept 16-bit weights among them), then ROUNDS rounds of vram
# bf16 (weights cast per product, weights kept; kept without recomputation) and fp16, beside
# PyTorch's same-layout model eager and under torch.compile (bench/gpt2_torch.py), GPT-2 124M,
# B=8 T=1024 AdamW, 30 steps each (median of steps 2..30); a kernel profile; and the 200-step
# bf16 loss check against PyTorch autocast. Logs under $OUT (or ./gpu-out); a table last.
#   ROUNDS=2 bench/run_mixed_speed_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; git log --oneline -1; } \
  > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
D=b/data/kjv.txt
timeout 150 b/tests/gpu_test_gpu_ops 1 > "$OUT/ops.log" 2>&1; echo "gpu ops rc=$?"; grep -E "FAIL|passed" "$OUT/ops.log" | head -8
CONFIGS=("bf16 --lowp-weights cast" "bf16 --lowp-weights keep" "bf16 --lowp-weights keep --recompute none" "fp16 --lowp-weights keep")
for ((r = 1; r <= ROUNDS; r++)); do
  for v in "${CONFIGS[@]}"; do
    t=$(echo "$v" | tr -d ' -')
    timeout 120 b/vram train --device cuda:0 --model gpt2 --data $D --batch 8 --steps 30 --lr 3e-4 --precision $v --report \
      > "$OUT/vram_${t}_$r.log" 2>&1
    echo "vram [$v] round $r rc=$?: $(grep -E '^summary' "$OUT/vram_${t}_$r.log")"
  done
  timeout 240 python3 bench/gpt2_torch.py speed --precision bf16 --models same,same-compile --steps 25 > "$OUT/torch_$r.log" 2>&1
  echo "torch round $r rc=$?"; grep "^torch" "$OUT/torch_$r.log"
done
VRAM_CUDA_PROFILE=1 timeout 60 b/vram train --device cuda:0 --model gpt2 --data $D --batch 8 --steps 6 --precision bf16 \
  --lowp-weights keep > "$OUT/profile.log" 2>&1
timeout 120 b/bench/bench_gpt2_reference --out "$OUT/ref" --steps 200 --batch 8 --precision bf16 --data $D > "$OUT/ref.log" 2>&1 \
  && timeout 200 python3 bench/gpt2_torch.py check "$OUT/ref" --precision bf16 > "$OUT/check.log" 2>&1
echo "bf16 loss check rc=$?"; tail -2 "$OUT/check.log" 2>/dev/null
rm -f "$OUT"/ref/*.bin
echo "| run | ms/step by round | tokens/s | peak allocated |"; echo "|---|---|---|---|"
for v in "${CONFIGS[@]}"; do
  t=$(echo "$v" | tr -d ' -')
  ms=$(cat "$OUT"/vram_${t}_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms, \([0-9]*\) tokens.*peak allocated \([0-9.]*\) MiB.*/\1/p' | paste -sd' ')
  last=$(grep -h '^summary' "$OUT"/vram_${t}_*.log 2>/dev/null | tail -1 | sed 's/^summary: median step [0-9.]* ms, //')
  echo "| vram $v | $ms | $last |"
done
grep -h "^torch" "$OUT"/torch_*.log

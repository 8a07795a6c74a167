#!/usr/bin/env bash
# run_residual_gpu.sh — issue 38's loss bar with the residual stream f32 (autocast's rule) and
# 16-bit (llm.c's, the default) in one call, about 5 minutes on an H100: build; the GPU op tests
# (the mixed add and the layer norms from f32 to 16 bits among them, and the GPT in both modes
# against f32 on the CPU); per mode the 200-step bf16 run from the same initial weights on the same
# text batches (bench_gpt2_reference) checked against PyTorch under autocast, run twice to measure
# its own spread (gpt2_torch.py check); then ROUNDS rounds of both modes' speed and memory (GPT-2
# 124M, B=8, T=1024, AdamW, --lowp-weights keep, 30 steps, the median of steps 2..30) and what
# `vram plan` predicted for them. Logs under $OUT (or ./gpu-out); a table last.
#   ROUNDS=2 bench/run_residual_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
MODES=(lowp fp32)
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; git log --oneline -1; } \
  > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram bench_gpt2_reference gpu_test_gpu_ops >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
D=b/data/kjv.txt
[ -s $D ] || { echo "no corpus at $D (the build copies data/kjv.txt.gz there)"; exit 1; }
timeout 200 b/tests/gpu_test_gpu_ops 1 > "$OUT/ops.log" 2>&1
echo "gpu ops rc=$?: $(grep -E 'passed' "$OUT/ops.log" | tail -1)"
grep -E "FAIL|^gpt bf16" "$OUT/ops.log" | head -12
for m in "${MODES[@]}"; do
  timeout 150 b/bench/bench_gpt2_reference --out "$OUT/ref_$m" --steps 200 --batch 8 --precision bf16 --residual $m \
    --data $D > "$OUT/ref_$m.log" 2>&1 \
    && timeout 240 python3 bench/gpt2_torch.py check "$OUT/ref_$m" --precision bf16 > "$OUT/check_$m.log" 2>&1
  echo "loss check, residual $m: rc=$?"; tail -1 "$OUT/check_$m.log" 2>/dev/null || tail -3 "$OUT/ref_$m.log"
  rm -f "$OUT"/ref_$m/*.bin # (the initial weights and gradients: 1 GB that need not come back)
done
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODES[@]}"; do
    timeout 120 b/vram train --device cuda:0 --model gpt2 --data $D --batch 8 --steps 30 --lr 3e-4 --precision bf16 \
      --lowp-weights keep --residual $m --report > "$OUT/speed_${m}_$r.log" 2>&1
    echo "vram bf16 --residual $m round $r rc=$?: $(grep -E '^summary' "$OUT/speed_${m}_$r.log")"
  done
done
for m in "${MODES[@]}"; do
  b/vram plan --device cuda --model gpt2 --batch 8 --precision bf16 --lowp-weights keep --residual $m > "$OUT/plan_$m.log" 2>&1
done
echo
echo "| --residual | mean \|vram - torch\| | PyTorch's spread | step-1 gradients (vram / PyTorch's own) | verdict | ms/step by round | tokens/s | peak allocated (planned) | activations |"
echo "|---|---:|---:|---:|---|---|---:|---:|---:|"
for m in "${MODES[@]}"; do
  c=$(tail -1 "$OUT/check_$m.log" 2>/dev/null)
  mv=$(echo "$c" | sed -n 's/.*mean |vram - torch| \([0-9.e+-]*\).*/\1/p')
  sp=$(echo "$c" | sed -n 's/.*attention) mean \([0-9.e+-]*\).*/\1/p')
  gr=$(echo "$c" | sed -n 's/.*relative norm difference \([0-9.e+-]*\) (PyTorch.s own \([0-9.e+-]*\)).*/\1 \/ \2/p')
  v=$(echo "$c" | grep -oE 'PASS|FAIL' | head -1)
  ms=$(cat "$OUT"/speed_${m}_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' ')
  tk=$(grep -h '^summary' "$OUT"/speed_${m}_*.log 2>/dev/null | tail -1 | sed -n 's/.* ms, \([0-9]*\) tokens.*/\1/p')
  pk=$(grep -h '^summary' "$OUT"/speed_${m}_*.log 2>/dev/null | tail -1 | sed -n 's/.*peak allocated \([0-9.]* MiB\).*/\1/p')
  pp=$(sed -n 's/^peak allocated *\([0-9.]* MiB\).*/\1/p' "$OUT/plan_$m.log")
  ac=$(grep -h '^ *activations' "$OUT"/speed_${m}_*.log 2>/dev/null | tail -1 | awk '{print $4, $5}')
  echo "| $m | ${mv:-?} | ${sp:-?} | ${gr:-?} | ${v:-no result} | ${ms:-?} | ${tk:-?} | ${pk:-?} (${pp:-?}) | ${ac:-?} |"
done

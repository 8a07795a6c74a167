#!/usr/bin/env bash
# run_gpu_runtime.sh — the runtime on a GPU machine (issue 37), logs under $OUT (or ./gpu-out).
#   bench/run_gpu_runtime.sh [ops] [check] [speed] [memory] [profile]   (default: the first four)
# Builds vram (Release, into b/), then
#   ops     tests/gpu/test_gpu_ops.c: every op on the GPU against the CPU (random shapes,
#           broadcasting, non-contiguous inputs, gradients, optimizers)
#   check   bench_gpt2_reference + bench/gpt2_torch.py check: 20 fp32 steps of GPT-2 124M from the
#           same weights on the same batches as PyTorch (TF32 off): losses and step-1 gradients
#   speed   vram train --model gpt2 on the GPU, B=8 T=1024 fp32 AdamW, beside PyTorch eager fp32
#   memory  the memory mechanisms on the GPU: --checkpoint, --accum, sgd/adagrad, from the report
#   profile GPU time per kernel of 6 GPT-2 steps (VRAM_CUDA_PROFILE=1)
#   mixed   mixed precision (issue 38): the GPU tests of it; 200 steps bf16 and fp16 from the same
#           weights on the same text batches as PyTorch under autocast (bench/gpt2_torch.py check);
#           then, per round, vram fp32, bf16 (recompute none / gelu / both, --checkpoint, SGD,
#           accumulation), fp16, and PyTorch bf16 eager (HF,
#           HF with checkpointing, same layout) and torch.compile, B=8 T=1024 AdamW
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
what=${*:-ops check speed memory}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
V=b/vram
CORPUS=b/data/kjv.txt
if [[ $what == *ops* ]]; then
  timeout 300 b/tests/gpu_test_gpu_ops "${TRIALS:-3}" > "$OUT/ops.log" 2>&1; echo "gpu ops rc=$?"
  grep -E "FAIL|passed" "$OUT/ops.log" | head -30
fi
if [[ $what == *check* ]]; then
  timeout 300 b/bench/bench_gpt2_reference --out "$OUT/ref" --steps 20 --batch "${CHECK_BATCH:-8}" > "$OUT/ref.log" 2>&1
  echo "reference rc=$?"; tail -3 "$OUT/ref.log"
  timeout 300 python3 bench/gpt2_torch.py check "$OUT/ref" --batch "${CHECK_BATCH:-8}" > "$OUT/check.log" 2>&1
  echo "check rc=$?"; tail -25 "$OUT/check.log"
  rm -f "$OUT"/ref/*.bin
fi
if [[ $what == *speed* ]]; then
  for r in ${ROUNDS:-1 2}; do
    timeout 300 $V train --device cuda:0 --model gpt2 --data $CORPUS --batch 8 --steps 30 --lr 3e-4 --report \
      > "$OUT/train_gpt2_$r.log" 2>&1; echo "vram train round $r rc=$?"
    grep -E "^summary|categories add up|^  (parameters|gradients|optimizer|activations|temporaries|other) " "$OUT/train_gpt2_$r.log"
    timeout 300 python3 bench/gpt2_torch.py speed --steps 25 > "$OUT/torch_speed_$r.log" 2>&1; echo "torch round $r rc=$?"
    tail -3 "$OUT/torch_speed_$r.log"
  done
fi
if [[ $what == *memory* ]]; then
  for v in "--optimizer sgd" "--optimizer adagrad" "--optimizer adamw" "--checkpoint" "--batch 4 --accum 2"; do
    timeout 300 $V train --device cuda:0 --model gpt2 --data $CORPUS --batch 8 --steps 4 --lr 3e-4 $v --report \
      > "$OUT/mem.log" 2>&1; echo "memory [$v] rc=$?"
    grep -E "^summary|^  (parameters|gradients|optimizer state|activations) " "$OUT/mem.log"
  done
  timeout 120 $V train --device cuda:0 --model gpt2 --data $CORPUS --batch 8 --steps 2 --capacity 3GiB > "$OUT/oom.log" 2>&1
  echo "capacity 3GiB rc=$? (want 1)"; head -c 1500 "$OUT/oom.log"
fi
if [[ $what == *mixed* ]]; then
  (cd b && timeout 300 ctest -R "gpu_test_grad_scaler|gpu_cli_train_mixed" --output-on-failure > "$OUT/mixed_tests.log" 2>&1)
  echo "mixed-precision GPU tests rc=$?"; grep -E "tests passed|Passed|Failed|FAIL" "$OUT/mixed_tests.log" | head
  for p in ${MIXED_CHECK:-bf16 fp16}; do
    timeout 300 b/bench/bench_gpt2_reference --out "$OUT/ref_$p" --steps "${MIXED_STEPS:-200}" --batch 8 --precision $p \
      --data $CORPUS > "$OUT/ref_$p.log" 2>&1; echo "reference $p rc=$?"
    timeout 300 python3 bench/gpt2_torch.py check "$OUT/ref_$p" --precision $p > "$OUT/check_$p.log" 2>&1
    echo "check $p rc=$?"; tail -1 "$OUT/check_$p.log"
    rm -f "$OUT"/ref_$p/*.bin
  done
  for r in ${ROUNDS:-1 2}; do
    for v in "--precision fp32" "--precision bf16 --recompute none" "--precision bf16 --recompute gelu" "--precision bf16" \
             "--precision bf16 --checkpoint" "--precision bf16 --optimizer sgd" "--precision bf16 --batch 4 --accum 2" \
             "--precision fp16"; do
      tag=$(echo "$v" | tr -d ' -'); log="$OUT/mixed_${tag}_$r.log"
      timeout 300 $V train --device cuda:0 --model gpt2 --data $CORPUS --batch 8 --steps 30 --lr 3e-4 $v --report > "$log" 2>&1
      echo "vram [$v] round $r rc=$?"; grep -E "^summary|^model FLOPs|^loss scaling|^  (parameters|gradients|optimizer state|activations|temporaries) " "$log"
    done
    timeout 400 python3 bench/gpt2_torch.py speed --precision bf16 --models "${TORCH_MODELS:-hf,hf-ckpt,same,same-compile}" \
      --steps 25 > "$OUT/torch_bf16_$r.log" 2>&1; echo "torch bf16 round $r rc=$?"; grep "^torch" "$OUT/torch_bf16_$r.log"
  done
fi
if [[ $what == *profile* ]]; then
  VRAM_CUDA_PROFILE=1 timeout 300 $V train --device cuda:0 --model gpt2 --data $CORPUS --batch 8 --steps 6 --lr 3e-4 \
    > "$OUT/profile.log" 2>&1; echo "profile rc=$?"
  grep -A40 "GPU time by kernel" "$OUT/profile.log"
fi

#!/usr/bin/env bash
# run_infer_gpu.sh — inference on the GPU beside PyTorch (issue 43), everything under $OUT (or
# ./gpu-infer-out); about 3 minutes on an H100. Needs python3 with torch and transformers, no network.
#   bench/run_infer_gpu.sh
# 1. builds vram (Release, into b-infer/ or $BUILD_DIR: the vram command and the GPU inference test only);
# 2. tests/gpu/test_gpu_infer.c: each GPU inference kernel against the CPU's, then a small model on both;
# 3. bench/infer_torch.py make: a GPT-2 124M with random weights (HF transformers, seed 0) saved as
#    safetensors, and 8 prompts of 32 random token ids;
# 4. vram generate --device cuda:0 on that file, greedy, TOKENS (64) new tokens, batch 1 and 8, weights
#    f32, bf16, int8 (Q8_0) and int8 per channel (Q8_R), ROUNDS (2) rounds; the first round of batch 1
#    also writes the first prompt's logits;
#    (DEVICE=cpu SKIP_TORCH=1 with a model dir already made: the vram half alone, as a dry run)
# 5. PyTorch eager f32 and bf16 on the same prompts (and torch.compile f32 when it works within 90 s; COMPILE=0 skips it);
# 6. the report: logits and greedy tokens against PyTorch, decode tokens/s and memory, table last.
set -u
OUT=${OUT:-$PWD/gpu-infer-out}
TOKENS=${TOKENS:-64}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; git log -1 --format='commit %H %s';
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'; } \
  > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
t0=$(date +%s)
B=${BUILD_DIR:-b-infer}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" --target vram gpu_test_gpu_infer >> "$OUT/build.log" 2>&1 ||
  { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
V=$B/vram

timeout 120 $B/tests/gpu_test_gpu_infer > "$OUT/kernels.log" 2>&1; echo "gpu inference kernels test rc=$?"
grep -E "FAIL|passed|SKIP" "$OUT/kernels.log" | head -30

D=$OUT/model
DEVICE=${DEVICE:-cuda:0}
if [ -z "${SKIP_TORCH:-}" ]; then
  timeout 180 python3 bench/infer_torch.py make "$D" > "$OUT/make.log" 2>&1; rc=$?
  tail -2 "$OUT/make.log"
  if [ $rc -ne 0 ] || [ ! -s "$D/model.safetensors" ]; then echo "making the PyTorch model failed (rc=$rc)"; tail -20 "$OUT/make.log"; exit 1; fi
fi

for r in $(seq 1 "$ROUNDS"); do
  for b in 1 8; do
    mapfile -t PROMPTS < "$D/prompts_b$b.args"
    for f in f32 bf16 q8_0 q8_r; do
      case $f in f32) q=(--temperature 0);; bf16) q=(--temperature 0 --bf16);; q8_0) q=(--temperature 0 --int8);;
                  q8_r) q=(--temperature 0 --int8-row);; esac
      [ "$r" = 1 ] && [ "$b" = 1 ] && q+=(--logits "$D/vram_logits_$f.bin")
      timeout 120 $V generate --device "$DEVICE" --model "$D/model.safetensors" "${PROMPTS[@]}" --tokens "$TOKENS" \
        --print-ids "${q[@]}" > "$D/vram_${f}_b${b}_r$r.log" 2>&1
      echo "vram $f batch $b round $r rc=$? $(grep -o 'decode: .*tokens/s' "$D/vram_${f}_b${b}_r$r.log")"
    done
  done
done
if [ -z "${SKIP_TORCH:-}" ]; then
  for dt in f32 bf16; do
    timeout 150 python3 bench/infer_torch.py run "$D" --dtype $dt --batches 1,8 --tokens "$TOKENS" --rounds "$ROUNDS" \
      > "$D/torch_$dt.log" 2>&1; echo "torch $dt rc=$?"; grep "^torch" "$D/torch_$dt.log" || tail -5 "$D/torch_$dt.log"
  done
  if [ "${COMPILE:-1}" = 1 ]; then
    timeout 90 python3 bench/infer_torch.py run "$D" --dtype f32 --batches 1,8 --tokens "$TOKENS" --rounds 1 --compile \
      > "$D/torch_compile.log" 2>&1; echo "torch.compile f32 rc=$? (a failure or timeout leaves its rows out)"
    grep "^torch" "$D/torch_compile.log" || tail -3 "$D/torch_compile.log"
  fi
fi
[ -z "${KEEP_MODEL:-}" ] && rm -f "$D/model.safetensors" # (500 MB; the report reads the logs)
echo "total $(( $(date +%s) - t0 )) s"
echo
python3 bench/infer_torch.py report "$D" 2>&1 | tee "$OUT/report.txt"

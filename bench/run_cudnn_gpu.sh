#!/usr/bin/env bash
# run_cudnn_gpu.sh — VRAM_ATTENTION=cudnn's first GPU run, in one device call (issue 38): build;
# test_cudnn_graph (every descriptor against the installed libcudnn); gpu_test_gpu_cudnn with
# VRAM_CUDNN_DEBUG=1 (each stage of the first shape's plans on stderr); bench_flash (its cudnn
# row beside the flash forms); then GPT-2 bf16 training with the flash kernels and with cuDNN in
# turns, ROUNDS rounds, and one VRAM_CUDA_PROFILE run of each. Logs in $OUT/logs.tgz, a summary
# in $OUT/log.txt.   OUT=dir ROUNDS=2 bench/run_cudnn_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
W=$(mktemp -d)
mkdir -p "$OUT"
L=$OUT/log.txt
say() { echo "$*" | tee -a "$L"; }
pack() { tar czf "$OUT/logs.tgz" -C "$W" . 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log -1 --oneline 2>/dev/null; } >> "$L" 2>&1
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$W/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram test_cudnn_graph gpu_test_gpu_cudnn bench_flash >> "$W/build.log" 2>&1 \
  || { say "BUILD FAILED"; tail -30 "$W/build.log"; pack; exit 1; }
grep -i cudnn "$W/build.log" | head -2 | tee -a "$L"
b/tests/test_cudnn_graph > "$W/graph.log" 2>&1; say "test_cudnn_graph rc=$?: $(tail -1 "$W/graph.log")"
grep FAIL "$W/graph.log" | head -3 | tee -a "$L"
VRAM_CUDNN_DEBUG=1 timeout 300 b/tests/gpu_test_gpu_cudnn > "$W/test.log" 2>&1
say "gpu_test_gpu_cudnn rc=$?: $(tail -1 "$W/test.log")"
grep -E "FAIL|vram: VRAM_ATTENTION|cuDNN ran|plan of|not installed" "$W/test.log" | head -12 | tee -a "$L"; pack
timeout 120 b/bench/bench_flash --rounds 20 > "$W/bench_flash.log" 2>&1
say "bench_flash rc=$?"; grep -E '^\||NOT cuDNN' "$W/bench_flash.log" | tee -a "$L"; pack
TRAIN="--device cuda:0 --model gpt2 --data b/data/kjv.txt --batch 8 --steps 20 --lr 3e-4 --precision bf16 --lowp-weights keep"
for ((r = 1; r <= ROUNDS; r++)); do
  for p in flash cudnn; do
    VRAM_ATTENTION=$p timeout 120 b/vram train $TRAIN > "$W/train_${p}_$r.log" 2>&1
    say "train VRAM_ATTENTION=$p round $r rc=$?: $(grep -E '^summary' "$W/train_${p}_$r.log")"
    grep -E "VRAM_ATTENTION|^done:" "$W/train_${p}_$r.log" | head -3 | tee -a "$L"
  done
  pack
done
for p in flash cudnn; do
  VRAM_ATTENTION=$p VRAM_CUDA_PROFILE=1 timeout 120 b/vram train $TRAIN --steps 10 > "$W/profile_$p.log" 2>&1
  say "profile VRAM_ATTENTION=$p rc=$?"; grep -A8 "GPU time by kernel" "$W/profile_$p.log" | tee -a "$L"
done
pack

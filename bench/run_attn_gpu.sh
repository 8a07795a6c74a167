#!/usr/bin/env bash
# run_attn_gpu.sh — flash attention's one-pass backward against the split one (issue 38), one
# call of about 4 minutes on an H100: builds vram, the GPU tests and bench_flash; runs
# gpu_test_gpu_flash (the backward variants in bf16 and f16 against the CPU and each other) and
# gpu_test_gpu_ops 1; bench_flash at GPT-2's layer shape (B=8 T=1024 H=12, every variant); then
# ROUNDS rounds of vram bf16 with kept weights, GPT-2 124M B=8 T=1024 AdamW, 30 steps, with
#   fused   VRAM_FLASH_BWD=fused: FlashAttention-2's one pass, dQ added atomically (the default)
#   fused3  VRAM_FLASH_BWD=fused3: the same kernel held to 168 registers, three blocks an SM
#   split   VRAM_FLASH_BWD=split: a dK/dV kernel and a dQ kernel, each recomputing P
#   fused128, fused128p, split128: the same over 128-key blocks of 8 warps (fused128p: dQ one
#           tile behind, one barrier an iteration)
#   rows32  VRAM_FLASH_FWD=rows32 with fused: the forward with 2 warps of 32 rows a block
# (all with VRAM_ATTENTION=flash: our kernels, not cuDNN's default attention)
# and a 6-step VRAM_CUDA_PROFILE=1 kernel profile of fused, split, fused128 and fused128p. Everything lands in $OUT (or
# ./gpu-out): summary.txt (what is printed here) and logs.tgz (every log); a table last.
#   ROUNDS=2 bench/run_attn_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
L=$(mktemp -d)
main() {
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; git log -1 --oneline 2>/dev/null; } \
  > "$L/machine.txt" 2>&1
cat "$L/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$L/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram gpu_test_gpu_ops gpu_test_gpu_flash bench_flash >> "$L/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$L/build.log"; return 1; }
D=b/data/kjv.txt

timeout 180 b/tests/gpu_test_gpu_flash > "$L/gpu_flash.log" 2>&1
echo "gpu_test_gpu_flash rc=$?: $(tail -1 "$L/gpu_flash.log")"
grep -E "FAIL|against split|rows32 against|B=1 T=1000" "$L/gpu_flash.log" | head -24
timeout 150 b/tests/gpu_test_gpu_ops 1 > "$L/gpu_ops.log" 2>&1
echo "gpu_test_gpu_ops 1 rc=$?: $(tail -1 "$L/gpu_ops.log")"
grep -E "FAIL" "$L/gpu_ops.log" | head -6

timeout 90 b/bench/bench_flash --batch 8 --seq 1024 --heads 12 --dtype bf16 --rounds 20 > "$L/bench_flash.log" 2>&1
echo "bench_flash rc=$?"

TRAIN="--device cuda:0 --model gpt2 --data $D --batch 8 --steps 30 --lr 3e-4 --precision bf16 --lowp-weights keep"
export VRAM_ATTENTION=flash # our kernels: cuDNN's attention, the default, would run instead
fwd() { if [ "$1" = rows32 ]; then echo rows32; else echo rows16; fi; }
bwd() { if [ "$1" = rows32 ]; then echo fused; else echo "$1"; fi; }
run() { # NAME ROUND
  VRAM_FLASH_FWD=$(fwd "$1") VRAM_FLASH_BWD=$(bwd "$1") timeout 120 b/vram train $TRAIN > "$L/vram_$1_$2.log" 2>&1
  echo "vram [$1] round $2 rc=$?: $(grep -E '^summary' "$L/vram_$1_$2.log")"
}
for ((r = 1; r <= ROUNDS; r++)); do
  for v in fused fused3 split fused128 fused128p split128 rows32; do run $v "$r"; done
done
for v in fused split fused128 fused128p; do
  VRAM_FLASH_BWD=$v VRAM_CUDA_PROFILE=1 timeout 60 b/vram train $TRAIN --steps 6 > "$L/profile_$v.log" 2>&1
  echo "profile $v rc=$?"
  grep -E "GPU time by kernel|vk_flash" "$L/profile_$v.log" | head -6
done

med() { cat "$L"/vram_$1_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' '; }
mid() { echo "$1" | tr ' ' '\n' | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
peaks() { grep -h '^summary' "$L/vram_$1_1.log" 2>/dev/null | sed -n 's/.*; \(peak allocated.*\)$/\1/p'; }
# the flash kernels' GPU ms over the 6 profiled steps, by kernel
flash() { grep -E '^ +vk_flash' "$L/profile_$1.log" 2>/dev/null | awk '{printf "%s%s %s", s, $1, $3; s="; "}'; }
echo
grep -E '^\|' "$L/bench_flash.log"
echo
echo "| run (bf16, --lowp-weights keep, 30 steps) | ms/step by round | median | peaks (round 1) | flash kernels, ms in 6 profiled steps |"
echo "|---|---|---|---|---|"
for v in fused fused3 split fused128 fused128p split128 rows32; do
  echo "| VRAM_FLASH_FWD=$(fwd $v) VRAM_FLASH_BWD=$(bwd $v) | $(med $v) | $(mid "$(med $v)") | $(peaks $v) | $(flash $v) |"
done
}
main 2>&1 | tee "$OUT/summary.txt"
tar -czf "$OUT/logs.tgz" -C "$L" .

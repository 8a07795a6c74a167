#!/usr/bin/env bash
# one device call: cuDNN attention as the default (tests, bench_flash), speed beside torch.compile
# (same-layout and HF), the op tests, changing-shape inference under vram and auto plans
set -u
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
P=$(mktemp -d); L=$OUT/log.txt
pack() { tar czf "$OUT/logs.tgz" -C "$P" . 2>/dev/null; }
say() { echo "$*" >> "$L"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } >> "$L"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$P/build.log" 2>&1 && cmake --build b -j16 --target vram gpu_test_gpu_cudnn \
  gpu_test_gpu_ops gpu_test_gpu_flash bench_flash vram_torch >> "$P/build.log" 2>&1 || { say "BUILD FAILED"; tail -20 "$P/build.log" >> "$L"; pack; exit 1; }
say "build $(el)"
timeout 120 b/tests/gpu_test_gpu_cudnn > "$P/cudnn.log" 2>&1; say "gpu_test_gpu_cudnn rc=$? $(tail -1 $P/cudnn.log) $(el)"
grep -E "FAIL|default against" "$P/cudnn.log" | head -6 >> "$L"
timeout 60 b/bench/bench_flash --rounds 20 > "$P/bench_flash.log" 2>&1; say "bench_flash rc=$?"; grep -E '^\||NOT' "$P/bench_flash.log" >> "$L"; pack
TRAIN="--device cuda:0 --model gpt2 --data b/data/kjv.txt --batch 8 --steps 30 --lr 3e-4 --precision bf16 --lowp-weights keep"
for r in 1 2; do
  for p in auto flash; do
    [[ $r == 2 && $p == flash ]] && continue
    VRAM_ATTENTION=$p timeout 90 b/vram train $TRAIN > "$P/train_${p}_$r.log" 2>&1
    say "vram VRAM_ATTENTION=$p round $r rc=$?: $(grep '^summary' $P/train_${p}_$r.log)"
  done
  m=same-compile; [[ $r == 1 ]] && m=same-compile,hf-compile
  timeout 240 python3 bench/gpt2_torch.py speed --precision bf16 --models $m --steps 25 > "$P/torch_$r.log" 2>&1
  say "torch round $r rc=$?"; grep '^torch' "$P/torch_$r.log" >> "$L"; pack
done
OUT=$P/place RECORD=0 ROUNDS=1 ALLOCS="native vram vram+plan+auto" WORKLOADS=infer_resnet50,infer_convnext \
  timeout 150 bash bench/run_placement_gpu.sh > "$P/place.log" 2>&1
say "place rc=$? $(el)"; grep '^|' "$P/place.log" | tail -7 >> "$L"; pack
timeout 120 b/tests/gpu_test_gpu_ops 1 > "$P/ops.log" 2>&1; say "ops rc=$? $(tail -1 $P/ops.log) $(el)"; grep FAIL "$P/ops.log" | head -5 >> "$L"
pack; cat "$L"

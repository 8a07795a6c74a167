#!/usr/bin/env bash
# run_pending_gpu.sh — in one device call, most needed first, every measurement whose code is in
# the tree but has not yet run on a GPU (device time is scarce: a call may be cut short, so the
# logs are packed into $OUT/logs.tgz after every stage and $OUT holds at most four files):
#   1 tests    gpu_test_gpu_flash (every flash backward form, the 128-key ones for the first
#              time), gpu_test_gpu_cudnn and bench_flash (every form beside cuDNN's)
#   2 speed    vram bf16 with kept weights (cuDNN attention, the default), in turns with
#              torch.compile on the same-layout model and on HF's GPT2LMHeadModel (round 1),
#              ROUNDS rounds: the ratio issue 38 asks for; beside them --recompute gelu and our
#              kernels with the 128-key one-pass backward (VRAM_ATTENTION=flash
#              VRAM_FLASH_BWD=fused128)
#   3 losses   200-step bf16 losses against PyTorch's (bench_gpt2_reference, gpt2_torch.py
#              check) with cuDNN's attention, the default
#   4 place    issue 46: ConvNeXt and ResNet-50 on changing shapes with 4 MiB chunks beside plain
#              vram (bench/run_placement_gpu.sh, ROUNDS rounds); the step time of
#              VRAM_STEP_PLAN=auto over several rounds is bench/run_placement_gpu.sh's own call
#              (OUT=dir RECORD=0 ROUNDS=3 ALLOCS="native vram vram+plan+auto", about 12 minutes)
# STAGES picks and orders them (default "tests speed losses place"). A table per stage in
# $OUT/log.txt.   OUT=dir ROUNDS=2 bench/run_pending_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
STAGES=${STAGES:-tests speed losses place}
W=$(mktemp -d)
mkdir -p "$OUT"
L=$OUT/log.txt
say() { echo "$*" | tee -a "$L"; }
pack() { tar czf "$OUT/logs.tgz" -C "$W" . 2>/dev/null; }
T0=$(date +%s)
el() { echo "($(( $(date +%s) - T0 )) s)"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; git log -1 --oneline 2>/dev/null
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } >> "$L" 2>&1
cat "$L"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$W/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram gpu_test_gpu_cudnn gpu_test_gpu_flash bench_flash bench_gpt2_reference vram_torch >> "$W/build.log" 2>&1 \
  || { say "BUILD FAILED"; tail -30 "$W/build.log"; pack; exit 1; }
say "build $(el)"
D=b/data/kjv.txt
TRAIN="--device cuda:0 --model gpt2 --data $D --batch 8 --steps 30 --lr 3e-4 --precision bf16 --lowp-weights keep"
ms() { sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' "$@" 2>/dev/null | paste -sd' '; }

stage_tests() {
  timeout 200 b/tests/gpu_test_gpu_flash > "$W/flash.log" 2>&1
  say "gpu_test_gpu_flash rc=$?: $(tail -1 "$W/flash.log")"
  grep -E "FAIL|against split" "$W/flash.log" | head -8 | tee -a "$L"
  timeout 120 b/tests/gpu_test_gpu_cudnn > "$W/cudnn.log" 2>&1
  say "gpu_test_gpu_cudnn rc=$?: $(tail -1 "$W/cudnn.log")"
  grep FAIL "$W/cudnn.log" | head -5 | tee -a "$L"
  timeout 90 b/bench/bench_flash --rounds 20 > "$W/bench_flash.log" 2>&1
  say "bench_flash rc=$?"; grep -E '^\||NOT' "$W/bench_flash.log" | tee -a "$L"
}

stage_speed() {
  for ((r = 1; r <= ROUNDS; r++)); do
    timeout 90 b/vram train $TRAIN > "$W/speed_default_$r.log" 2>&1
    say "vram (cuDNN attention) round $r rc=$?: $(grep '^summary' "$W/speed_default_$r.log")"
    timeout 90 b/vram train $TRAIN --recompute gelu > "$W/speed_rgelu_$r.log" 2>&1
    say "vram --recompute gelu round $r rc=$?: $(grep '^summary' "$W/speed_rgelu_$r.log")"
    VRAM_ATTENTION=flash VRAM_FLASH_BWD=fused128 timeout 90 b/vram train $TRAIN > "$W/speed_f128_$r.log" 2>&1
    say "vram VRAM_ATTENTION=flash VRAM_FLASH_BWD=fused128 round $r rc=$?: $(grep '^summary' "$W/speed_f128_$r.log")"
    local models=same-compile; ((r == 1)) && models=same-compile,hf-compile
    timeout 300 python3 bench/gpt2_torch.py speed --precision bf16 --models $models --steps 25 > "$W/torch_$r.log" 2>&1
    say "torch.compile round $r rc=$?: $(grep '^torch' "$W/torch_$r.log")"
    pack
  done
  say "| run | ms/step by round |"; say "|---|---|"
  say "| vram bf16, cuDNN attention (default) | $(ms "$W"/speed_default_*.log) |"
  say "| vram bf16, --recompute gelu | $(ms "$W"/speed_rgelu_*.log) |"
  say "| vram bf16, our kernels, VRAM_FLASH_BWD=fused128 | $(ms "$W"/speed_f128_*.log) |"
  say "| torch.compile, same-layout model | $(cat "$W"/torch_*.log 2>/dev/null | sed -n 's/.*same-layout torch.compile *\([0-9.]*\) ms.*/\1/p' | paste -sd' ') |"
  say "| torch.compile, HF GPT2LMHeadModel (round 1) | $(cat "$W"/torch_*.log 2>/dev/null | sed -n 's/.*HF torch.compile *\([0-9.]*\) ms.*/\1/p' | paste -sd' ') |"
}

stage_losses() {
  timeout 150 b/bench/bench_gpt2_reference --out "$W/ref" --steps 200 --batch 8 --precision bf16 --data $D > "$W/ref.log" 2>&1 &&
    timeout 300 python3 bench/gpt2_torch.py check "$W/ref" --precision bf16 > "$W/check.log" 2>&1
  echo "rc=$?" >> "$W/check.log"; rm -f "$W"/ref/*.bin
  say "loss check (cuDNN attention): $(tail -2 "$W/check.log" 2>/dev/null | paste -sd' ')"
}

stage_place() {
  OUT=$W/place_infer RECORD=0 ROUNDS=$ROUNDS ALLOCS="native vram vram:chunk_size_mb:4" WORKLOADS=infer_resnet50,infer_convnext \
    timeout 300 bash bench/run_placement_gpu.sh > "$W/place_infer.log" 2>&1
  say "placement, changing shapes rc=$?"; grep '^|' "$W/place_infer.log" | tail -8 | tee -a "$L"
}

for s in $STAGES; do
  case $s in
    tests | speed | losses | place) "stage_$s"; pack; say "stage $s done $(el)" ;;
    *) say "STAGES: '$s' is not tests, speed, losses or place"; exit 2 ;;
  esac
done
say "end $(el)"

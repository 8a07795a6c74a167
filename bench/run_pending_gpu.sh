#!/usr/bin/env bash
# run_pending_gpu.sh — every measurement whose code is in the tree but has not run on a GPU, most
# needed first, in stages that each fit one device call (the logs are packed into $OUT/logs.tgz
# after every stage; $OUT/log.txt holds a table per stage):
#   tests    the newer paths' GPU tests: gpu_test_gpu_classifier (VRAM_CE_KERNEL),
#            gpu_test_gpu_optim_list (VRAM_OPTIM_KERNEL), gpu_test_gpu_grad_adopt (VRAM_GRAD_ADOPT),
#            gpu_test_gpu_ops 1 (cuBLASLt's split-K path among them), gpu_test_gpu_flash (the
#            128-key backward forms), gpu_cli_train_mixed (the attention line); bench_classifier
#            and bench_optim (each new kernel beside the old, same run)
#   speed    GPT-2 124M bf16, kept weights (issue 38): the defaults, the three paths made default
#            on 2026-12-07 set back to their old forms (OLD), and split-K (opt-in), ROUNDS rounds in
#            turns; the defaults with --recompute none and gelu; HF's GPT2LMHeadModel and the
#            same-layout model under torch.compile in round 1 (the anchor); a 6-step profile
#   losses   200-step bf16 losses against PyTorch's under the defaults (bench_gpt2_reference,
#            gpt2_torch.py check)
#   place    issue 46: VRAM_STEP_PLAN=auto's step time beside plain vram over ROUNDS rounds (six
#            programs), and chunk_min_mb:2,reserve_slack:0.01 on the two inference programs
#   records  the planner's 15 GPU records measured again under the defaults, gradients by
#            reference among them (into $OUT only)
# About: tests 3 min, speed 5 min (ROUNDS=2), losses 1.5 min, place 6 min, records 2.5 min on an
# H100 after a 1-minute build. STAGES picks and orders them (default "tests speed losses"); QUICK=1
# leaves the flash and CLI tests out of `tests` (a short call: the new paths' tests and benches).
#   OUT=dir ROUNDS=2 bench/run_pending_gpu.sh;   OUT=dir STAGES="place records" bench/run_pending_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
STAGES=${STAGES:-tests speed losses}
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
  cmake --build b -j "$(nproc)" --target vram vram_torch gpu_test_gpu_classifier gpu_test_gpu_optim_list \
    gpu_test_gpu_grad_adopt gpu_test_gpu_ops gpu_test_gpu_flash bench_classifier bench_optim bench_gpt2_reference \
    >> "$W/build.log" 2>&1 || { say "BUILD FAILED"; tail -30 "$W/build.log"; pack; exit 1; }
say "build $(el)"
D=b/data/kjv.txt
TRAIN="--device cuda:0 --model gpt2 --data $D --batch 8 --steps 30 --lr 3e-4 --precision bf16 --lowp-weights keep"
OLD="VRAM_CE_KERNEL=old VRAM_OPTIM_KERNEL=old VRAM_GRAD_ADOPT=0"
ms() { sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' "$@" 2>/dev/null | paste -sd' '; }
peak() { grep -h '^summary' "$@" 2>/dev/null | tail -1 | sed -n 's/.*peak allocated \([0-9.]* MiB\).*/\1/p'; }

stage_tests() {
  local t
  for t in gpu_test_gpu_classifier gpu_test_gpu_optim_list gpu_test_gpu_grad_adopt; do
    timeout 120 b/tests/$t > "$W/$t.log" 2>&1
    say "$t rc=$?: $(grep passed "$W/$t.log" | tail -1)"; grep -m5 FAIL "$W/$t.log" | tee -a "$L"
  done
  grep "device copies" "$W/gpu_test_gpu_grad_adopt.log" | tee -a "$L"
  timeout 200 b/tests/gpu_test_gpu_ops 1 > "$W/ops.log" 2>&1
  say "gpu_test_gpu_ops rc=$?: $(tail -1 "$W/ops.log")"; grep -m8 -E "FAIL|split over K" "$W/ops.log" | tee -a "$L"
  if [ "${QUICK:-0}" != 1 ]; then
    timeout 200 b/tests/gpu_test_gpu_flash > "$W/flash.log" 2>&1
    say "gpu_test_gpu_flash rc=$?: $(tail -1 "$W/flash.log")"; grep -m5 FAIL "$W/flash.log" | tee -a "$L"
    (cd b && timeout 150 ctest -R '^gpu_cli_train_mixed$' --output-on-failure) > "$W/cli.log" 2>&1
    say "gpu_cli_train_mixed rc=$?: $(grep -E '^attention' "$W/cli.log" | head -2 | paste -sd' ')"
  fi
  timeout 60 b/bench/bench_classifier > "$W/bench_classifier.log" 2>&1; say "bench_classifier rc=$?"
  grep -E "^\||NOT|DISAGREE" "$W/bench_classifier.log" | tee -a "$L"
  timeout 60 b/bench/bench_optim --rounds 20 > "$W/bench_optim.log" 2>&1; say "bench_optim rc=$?"
  grep -E "^\||speedup" "$W/bench_optim.log" | tee -a "$L"
}

train() { # TAG "ENV..." [ARGS...]
  local tag=$1 envs=$2; shift 2
  env $envs timeout 90 b/vram train $TRAIN "$@" > "$W/speed_$tag.log" 2>&1
  say "$tag rc=$?: $(grep '^summary' "$W/speed_$tag.log")"
}

stage_speed() {
  local r
  for ((r = 1; r <= ROUNDS; r++)); do
    train "default_$r" "X=0"
    train "old_$r" "$OLD"
    train "splitk_$r" "VRAM_CUBLASLT_SPLITK=1"
    train "none_$r" "X=0" --recompute none
    train "gelu_$r" "X=0" --recompute gelu
    if ((r == 1)); then
      timeout 300 python3 bench/gpt2_torch.py speed --precision bf16 --models same-compile,hf-compile --steps 25 > "$W/torch.log" 2>&1
      say "torch.compile rc=$?: $(grep '^torch' "$W/torch.log" | paste -sd' ')"
    fi
    pack
  done
  VRAM_CUDA_PROFILE=1 timeout 60 b/vram train $TRAIN --steps 6 > "$W/profile.log" 2>&1
  sed -n '/GPU time by kernel/,/^done/p' "$W/profile.log" | head -16 | tee -a "$L"
  say "products split over K: $(grep -c 'split in [234]' "$W/profile.log") of $(grep -c 'best of' "$W/profile.log") tuned"
  local t
  say "| run | ms/step by round | peak allocated |"; say "|---|---|---:|"
  for t in default old splitk none gelu; do
    say "| $t | $(ms "$W"/speed_${t}_[0-9].log) | $(peak "$W"/speed_${t}_[0-9].log) |"
  done
  say "| torch.compile, same-layout | $(sed -n 's/.*same-layout torch.compile *\([0-9.]*\) ms.*/\1/p' "$W/torch.log" 2>/dev/null) | |"
  say "| torch.compile, HF GPT2LMHeadModel | $(sed -n 's/.*HF torch.compile *\([0-9.]*\) ms.*/\1/p' "$W/torch.log" 2>/dev/null) | |"
}

stage_losses() {
  timeout 150 b/bench/bench_gpt2_reference --out "$W/ref" --steps 200 --batch 8 --precision bf16 --data $D \
    > "$W/ref.log" 2>&1 && timeout 300 python3 bench/gpt2_torch.py check "$W/ref" --precision bf16 > "$W/check.log" 2>&1
  echo "rc=$?" >> "$W/check.log"; rm -f "$W"/ref/*.bin
  say "loss check (the defaults): $(tail -2 "$W/check.log" 2>/dev/null | paste -sd' ')"
}

stage_place() {
  OUT=$W/place_auto RECORD=0 ROUNDS=$ROUNDS ALLOCS="vram vram+plan+auto" RUN_TIMEOUT=150 \
    timeout 330 bash bench/run_placement_gpu.sh > "$W/place_auto.log" 2>&1
  say "placement, auto beside plain vram rc=$?"; grep '^|' "$W/place_auto.log" | tail -14 | tee -a "$L"
  OUT=$W/place_chunk RECORD=0 ROUNDS=$ROUNDS ALLOCS="vram vram:chunk_min_mb:2,reserve_slack:0.01" \
    WORKLOADS=infer_resnet50,infer_convnext RUN_TIMEOUT=100 timeout 200 bash bench/run_placement_gpu.sh > "$W/place_chunk.log" 2>&1
  say "placement, chunk_min_mb:2,reserve_slack:0.01 rc=$?"; grep '^|' "$W/place_chunk.log" | tail -6 | tee -a "$L"
  rm -rf "$W"/place_*/traces
}

stage_records() {
  timeout 200 python3 tests/plan_gpu_check.py --measure b/vram $D "$OUT/plan-gpu-records.json" \
    > "$W/records.log" 2>&1
  say "records (the defaults) rc=$?: $(tail -1 "$W/records.log")"
  cp bench/results/2026-12-06-plan-gpu-records.json "$W/records-before.json"
  cp "$OUT/plan-gpu-records.json" bench/results/2026-12-06-plan-gpu-records.json 2>/dev/null &&
    python3 tests/plan_gpu_check.py b/vram > "$W/records_check.log" 2>&1
  say "plan_gpu_check against them rc=$?"; grep -vE '^ok ' "$W/records_check.log" | tail -8 | tee -a "$L"
  cp "$W/records-before.json" bench/results/2026-12-06-plan-gpu-records.json
}

for s in $STAGES; do
  case $s in
    tests | speed | losses | place | records) "stage_$s"; pack; say "stage $s done $(el)" ;;
    *) say "STAGES: '$s' is not tests, speed, losses, place or records"; exit 2 ;;
  esac
done
say "end $(el)"

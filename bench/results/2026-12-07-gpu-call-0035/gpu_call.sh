#!/usr/bin/env bash
# temporary: the short device call of 2026-12-07 (deleted after; its log goes to bench/results)
set -u
W=$OUT; L=$OUT/log.txt; T0=$(date +%s)
say() { echo "$*" | tee -a "$L"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; git log -1 --oneline; } >> "$L" 2>&1
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$W/build.log" 2>&1 &&
  cmake --build b -j "$(nproc)" --target vram gpu_test_gpu_classifier gpu_test_gpu_optim_list gpu_test_gpu_grad_adopt \
    bench_classifier bench_optim >> "$W/build.log" 2>&1 || { say "BUILD FAILED"; tail -20 "$W/build.log"; exit 1; }
say "build $(( $(date +%s) - T0 )) s"
for t in gpu_test_gpu_classifier gpu_test_gpu_optim_list gpu_test_gpu_grad_adopt; do
  timeout 60 b/tests/$t > "$W/$t.log" 2>&1; say "$t rc=$?: $(grep passed "$W/$t.log" | tail -1)"
  grep -m5 FAIL "$W/$t.log" | tee -a "$L"
done
grep "device copies" "$W/gpu_test_gpu_grad_adopt.log" | tee -a "$L"
timeout 40 b/bench/bench_classifier > "$W/bench_classifier.log" 2>&1; say "bench_classifier rc=$?"
grep -E "^\||NOT|DISAGREE" "$W/bench_classifier.log" | tee -a "$L"
timeout 40 b/bench/bench_optim --rounds 10 > "$W/bench_optim.log" 2>&1; say "bench_optim rc=$?"
grep -E "^\||speedup" "$W/bench_optim.log" | tee -a "$L"
say "tests and benches $(( $(date +%s) - T0 )) s"
TRAIN="--device cuda:0 --model gpt2 --data b/data/kjv.txt --batch 8 --steps 20 --lr 3e-4 --precision bf16 --lowp-weights keep"
ALL="VRAM_CE_KERNEL=rows VRAM_OPTIM_KERNEL=vec VRAM_GRAD_ADOPT=1 VRAM_CUBLASLT_SPLITK=1"
for r in 1 2; do
  for c in "off|X=0" "on|$ALL" "ce|VRAM_CE_KERNEL=rows" "optim|VRAM_OPTIM_KERNEL=vec" "adopt|VRAM_GRAD_ADOPT=1" \
           "splitk|VRAM_CUBLASLT_SPLITK=1"; do
    tag=${c%%|*}; envs=${c#*|}
    env $envs timeout 45 b/vram train $TRAIN > "$W/speed_${tag}_$r.log" 2>&1
    say "$tag r$r rc=$?: $(grep '^summary' "$W/speed_${tag}_$r.log")"
  done
done
say "end $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# one combined device call, most needed first (the call may be cut short: logs are packed after every stage)
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
W=/tmp/w; mkdir -p $W/tp
pack() { tar czf "$OUT/logs.tgz" -C $W . 2>/dev/null; }
L=$OUT/log.txt
say() { echo "$*" | tee -a "$L"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; git log -1 --oneline 2>/dev/null; } >> "$L" 2>&1
cat "$L"
T0=$(date +%s)
el() { echo "($(( $(date +%s) - T0 )) s)"; }
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$W/build.log" 2>&1 &&
  cmake --build b -j 16 --target vram gpu_test_gpu_ops gpu_test_gpu_flash bench_flash vram_torch >> "$W/build.log" 2>&1 || { say BUILD FAILED; tail -30 "$W/build.log"; pack; exit 1; }
say "build $(el)"
D=b/data/kjv.txt
# issue 39: the grid's gelu row, alone (nothing else on the GPU), twice
G="--device cuda:0 --model gpt2 --batch 8 --steps 4 --lr 3e-4 --precision bf16 --recompute gelu --activation gelu_erf --data $D"
for r in 1 2; do timeout 40 b/vram train $G > "$W/gelurow_$r.log" 2>&1; say "gelurow $r rc=$?: $(grep '^summary' "$W/gelurow_$r.log")"; done
b/vram plan --device cuda --model gpt2 --batch 8 --precision bf16 --recompute gelu --activation gelu_erf > "$W/gelurow_plan.log" 2>&1
say "gelurow plan: $(grep -E '^peak (allocated|reserved)' "$W/gelurow_plan.log" | paste -sd';')"; pack
# the op tests (correctness) beside PyTorch's OOM remedies (each process capped; 4 at once as before)
( timeout 150 b/tests/gpu_test_gpu_ops 1 > "$W/ops.log" 2>&1; echo "rc=$?" >> "$W/ops.log"
  timeout 90 b/tests/gpu_test_gpu_flash > "$W/flash.log" 2>&1; echo "rc=$?" >> "$W/flash.log" ) &
OUT=$W/tp PARTS="oom" timeout 170 bash bench/run_torchplan_gpu.sh > "$W/torchplan.log" 2>&1
say "torchplan oom rc=$? $(el)"
for f in $W/tp/oom_*.json; do python3 -c "import json,sys; d=json.load(open('$f')); m=d.get('measured') or {}; print(d['model'], 'pred', round(d['predicted_peak_allocated']/2**20,1), round(d['predicted_peak_reserved']/2**20,1), 'meas', round(m.get('peak_allocated',0)/2**20,1), round(m.get('peak_reserved',0)/2**20,1), 'err', d.get('error_allocated'), d.get('error_reserved'))" 2>&1 | tee -a "$L"; done
pack; wait
say "ops $(tail -2 "$W/ops.log" | paste -sd' ') $(el)"
say "flash test $(tail -2 "$W/flash.log" | paste -sd' ')"
grep -E "FAIL" "$W/ops.log" "$W/flash.log" | head -12 | tee -a "$L"; pack
# issue 38: the new kernels (flash one-pass backward, bias-gradient epilogue, add + layer norm) against the old
TRAIN="--device cuda:0 --model gpt2 --data $D --batch 8 --steps 20 --lr 3e-4 --precision bf16 --lowp-weights keep"
sp() { local n=$1; shift; env "$@" > "$W/sp_$n.log" 2>&1; say "$n rc=$?: $(grep -E '^summary' "$W/sp_$n.log")"; }
sp new X=1 timeout 40 b/vram train $TRAIN
sp old VRAM_FLASH_BWD=split VRAM_BGRAD_EPILOGUE=0 VRAM_FUSED_ADD_LN=0 timeout 40 b/vram train $TRAIN
pack
# issue 39: the planner's records, one configuration at a time
timeout 150 python3 tests/plan_gpu_check.py --measure b/vram $D "$OUT/records.json" > "$W/records.log" 2>&1
say "records rc=$? $(el)"; cat "$W/records.log" | tee -a "$L"; pack
timeout 30 b/bench/bench_flash --batch 8 --seq 1024 --heads 12 --dtype bf16 --rounds 20 > "$W/bench_flash.log" 2>&1; say "bench_flash rc=$?"; tail -8 "$W/bench_flash.log" | tee -a "$L"
sp new2 X=1 timeout 40 b/vram train $TRAIN
sp old2 VRAM_FLASH_BWD=split VRAM_BGRAD_EPILOGUE=0 VRAM_FUSED_ADD_LN=0 timeout 40 b/vram train $TRAIN
sp splitbwd VRAM_FLASH_BWD=split timeout 40 b/vram train $TRAIN
sp tanhF X=1 timeout 40 b/vram train $TRAIN --activation gelu_tanh
sp res32 X=1 timeout 40 b/vram train $TRAIN --residual fp32
pack
timeout 100 python3 -c "import sys,json; sys.path.insert(0,'bench'); import plan_grid as p; print(json.dumps(p.remedy_rows('b/vram','$D',['--device','cuda:0','--model','gpt2','--precision','bf16','--batch','16'],'4GiB',4)))" > "$OUT/remedies.json" 2> "$W/remedies.err"
say "remedies rc=$?: $(head -c 1500 "$OUT/remedies.json") $(el)"; pack
OUT=$W/pl RECORD=0 ROUNDS=1 ALLOCS="native vram vram+plan+layers" WORKLOADS=gen_llama,gen_gpt2 timeout 200 bash bench/run_placement_gpu.sh > "$W/placement.log" 2>&1
say "placement rc=$?"; tail -12 "$W/placement.log" | tee -a "$L"
pack; say "end $(el)"

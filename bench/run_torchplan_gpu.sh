#!/usr/bin/env bash
# run_torchplan_gpu.sh — issue 39's measurements on a GPU machine (H100, PyTorch with CUDA,
# transformers, torchvision; no network), results under $OUT (or ./gpu-out), a table last.
#   bench/run_torchplan_gpu.sh                         every part, about 6 minutes on an H100
#   PARTS="fit oom grid" bench/run_torchplan_gpu.sh
#       the largest batch, OOM remedies, the runtime grid, all 29 configurations (about 6 minutes,
#       at most 8.5 by the timeouts: the fits and the grid at once, the OOM cases after the fits)
# Builds vram and libvram_torch.so (Release, into b/), then the parts asked (PARTS, default all):
#   test        tests/gpu/test_torch_categories.py (categories, leaks, explain_oom on an MLP)
#   categories  the eight workloads behind traces/ (sums exact, parameters/gradients/optimizer
#               state equal to what gc finds, no leak flagged)                    -> categories.json
#   fit         GPT-2, ResNet-50, BERT (variable lengths), Llama, each process capped by
#               set_per_process_memory_fraction: the true largest batch by real runs of the program
#               (Lightning-style and accelerate-style searches), then `python -m vram_torch fit
#               --allocator native` (traces kept in fit_M_files/); ResNet-50 also with
#               --elastic-workspaces                                               -> fit_*.json
#   oom         explain_oom's halved batch against a run of it: GPT-2 (8 GiB, batch 16), ResNet-50
#               (8 GiB, 128) and Llama (12 GiB, 32) failing in step 1 (an estimate of the step
#               from its forward), BERT (8 GiB, 40) in a later, longer step; after the fits (GPU
#               memory)                                                            -> oom_*.json
#   cli         run --categories --leaks: planted leaks, clean runs, AMP, checkpointing, compile
#   bad         fit on bad input
#   grid        `vram plan --device cuda` against `vram train --device cuda:0`: 29 configurations,
#               4 steps each, two trainings at once, and the runtime's remedies -> plan_grid_gpu.json
#               (GRID_FROM=an earlier plan_grid_gpu.json: its measured rows are kept, the rest run;
#               only while the runtime's allocations are unchanged since it was measured)
# then the table (bench/torchplan_bench.py table)                                  -> table.md
# The parts after the first two run at once (each process capped, or small); grid beside them.
set -u
OUT=${OUT:-$PWD/gpu-out}
PARTS=" ${PARTS:-test categories fit oom cli bad grid} "
mkdir -p "$OUT"
T0=$(date +%s)
has() { [[ $PARTS == *" $1 "* ]]; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)';
  python3 -c 'import transformers, torchvision; print("transformers", transformers.__version__, "torchvision", torchvision.__version__)';
  git log --oneline -1; echo "PARTS:$PARTS"; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 \
  && cmake --build b -j "$(nproc)" --target vram vram_torch >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
export VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
export VRAM=$PWD/b/vram
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
echo "build done after $(( $(date +%s) - T0 )) s"

if has test; then
  timeout 120 python3 tests/gpu/test_torch_categories.py "$VRAM_TORCH_LIBRARY" > "$OUT/test_torch_categories.log" 2>&1 &
fi
if has categories; then
  timeout 180 python3 bench/torchplan_bench.py categories --out "$OUT" > "$OUT/categories.log" 2>&1 &
fi
wait
if has test || has categories; then
  echo "test and categories done ($(( $(date +%s) - T0 )) s)"
  has test && grep -E "FAIL|passed|failed|Error" "$OUT/test_torch_categories.log" | head -20
  has categories && { grep -E '^\{' "$OUT/categories.log" | cut -c1-200; grep -E 'Error|Traceback' "$OUT/categories.log" | head -3; }
fi

# capacities (GiB) chosen so that the largest batch is in the tens: quick steps
if has grid; then
  timeout 420 python3 bench/plan_grid.py --device cuda --vram "$VRAM" --data b/data/kjv.txt --steps 4 --jobs 2 \
    ${GRID_FROM:+--resume "$GRID_FROM"} --json "$OUT/plan_grid_gpu.json" > "$OUT/grid.log" 2>&1 &
fi
FIT_PIDS=""
if has fit; then
  for m in "gpt2 10" "bert 8" "llama 12"; do
    set -- $m
    timeout 270 python3 bench/torchplan_bench.py fit --model "$1" --capacity "$2" --out "$OUT" > "$OUT/fit_$1.log" 2>&1 &
    FIT_PIDS="$FIT_PIDS $!"
  done
  # ResNet-50 two ways: as the others, and with --elastic-workspaces
  timeout 300 python3 bench/torchplan_bench.py fit --model resnet50 --capacity 8 --out "$OUT" --elastic \
    > "$OUT/fit_resnet50.log" 2>&1 &
  FIT_PIDS="$FIT_PIDS $!"
fi
has cli && { timeout 200 python3 bench/torchplan_bench.py cli --out "$OUT" > "$OUT/cli.log" 2>&1 & }
has bad && { timeout 200 python3 bench/torchplan_bench.py bad --out "$OUT" > "$OUT/bad.log" 2>&1 & }
if has oom; then
  # after the fits: each process sits near its cap, and the fits' (38 GiB), these (36 GiB) and the
  # grid's at once would not fit in the GPU (a process failing below its cap falsifies the figures)
  if [ -n "$FIT_PIDS" ]; then wait $FIT_PIDS; echo "fits done ($(( $(date +%s) - T0 )) s)"; fi
  for m in "gpt2 8 16" "bert 8 40" "resnet50 8 128" "llama 12 32"; do
    set -- $m
    timeout 150 python3 bench/torchplan_bench.py oom --model "$1" --capacity "$2" --batch "$3" --out "$OUT" \
      > "$OUT/oom_$1.log" 2>&1 &
  done
fi
wait
echo "parallel part done ($(( $(date +%s) - T0 )) s)"
for f in "$OUT"/fit_*.log "$OUT"/oom_*.log "$OUT"/cli.log "$OUT"/bad.log; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f")"; grep -E '^\{' "$f" | cut -c1-400; grep -E 'Error|Traceback' "$f" | head -3
done
if has grid; then
  echo "== grid.log"; tail -8 "$OUT/grid.log"
  [ -f "$OUT/plan_grid_gpu.json" ] && python3 tests/plan_gpu_check.py "$VRAM" "$OUT/plan_grid_gpu.json" > "$OUT/grid_check.log" 2>&1
  tail -1 "$OUT/grid_check.log" 2>/dev/null; grep FAIL "$OUT/grid_check.log" 2>/dev/null | head -10
fi
python3 bench/torchplan_bench.py table "$OUT" > "$OUT/table.md" 2>&1
echo "total $(( $(date +%s) - T0 )) s"
cat "$OUT/table.md"

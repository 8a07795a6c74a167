#!/usr/bin/env bash
# run_torchplan_gpu.sh — issue 39's measurements on a GPU machine (H100, PyTorch with CUDA,
# transformers, torchvision, timm; no network), results under $OUT (or ./gpu-out), a table last.
#   bench/run_torchplan_gpu.sh            about 5 minutes on an H100
# Builds vram and libvram_torch.so (Release, into b/), then
#   1. at once: tests/gpu/test_torch_categories.py (categories, leaks, explain_oom on an MLP), and
#   2. categories on the eight workloads behind traces/ (sums exact, parameters/gradients/optimizer
#      state equal to what gc finds, no leak flagged)                          -> categories.json
#   3. at once, each process capped by set_per_process_memory_fraction:
#      fit on GPT-2, ResNet-50, BERT (variable lengths), Llama: Lightning-style and accelerate-style
#      searches by real runs, then `python -m vram_torch fit --allocator native`  -> fit_*.json
#      the OOM remedy: GPT-2 at a batch that runs out, explain_oom's halved batch vs a run of it
#      run --categories --leaks: planted leaks, clean runs, AMP, checkpointing, torch.compile
#      fit on bad input
#   4. the table (bench/torchplan_bench.py table)                              -> table.md
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)';
  python3 -c 'import transformers, torchvision; print("transformers", transformers.__version__, "torchvision", torchvision.__version__)';
  git log --oneline -1; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 \
  && cmake --build b -j "$(nproc)" --target vram vram_torch >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
export VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
export VRAM=$PWD/b/vram
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
echo "build done after $(( $(date +%s) - T0 )) s"

timeout 120 python3 tests/gpu/test_torch_categories.py "$VRAM_TORCH_LIBRARY" > "$OUT/test_torch_categories.log" 2>&1 &
timeout 180 python3 bench/torchplan_bench.py categories --out "$OUT" > "$OUT/categories.log" 2>&1 &
wait
echo "test and categories done ($(( $(date +%s) - T0 )) s)"
grep -E "FAIL|passed|failed|Error" "$OUT/test_torch_categories.log" | head -20
grep -E '^\{' "$OUT/categories.log" | cut -c1-200; grep -E 'Error|Traceback' "$OUT/categories.log" | head -3

# capacities (GiB) chosen so that the largest batch is in the tens: quick steps
timeout 200 python3 bench/torchplan_bench.py fit --model gpt2 --capacity 10 --out "$OUT" > "$OUT/fit_gpt2.log" 2>&1 &
timeout 200 python3 bench/torchplan_bench.py fit --model resnet50 --capacity 8 --out "$OUT" > "$OUT/fit_resnet50.log" 2>&1 &
timeout 200 python3 bench/torchplan_bench.py fit --model bert --capacity 8 --out "$OUT" > "$OUT/fit_bert.log" 2>&1 &
timeout 200 python3 bench/torchplan_bench.py fit --model llama --capacity 12 --out "$OUT" > "$OUT/fit_llama.log" 2>&1 &
timeout 200 python3 bench/torchplan_bench.py oom --model gpt2 --capacity 8 --batch 16 --out "$OUT" > "$OUT/oom_gpt2.log" 2>&1 &
timeout 200 python3 bench/torchplan_bench.py cli --out "$OUT" > "$OUT/cli.log" 2>&1 &
timeout 200 python3 bench/torchplan_bench.py bad --out "$OUT" > "$OUT/bad.log" 2>&1 &
wait
echo "parallel part done ($(( $(date +%s) - T0 )) s)"
for f in "$OUT"/fit_*.log "$OUT"/oom_gpt2.log "$OUT"/cli.log "$OUT"/bad.log; do
  echo "== $(basename "$f")"; grep -E '^\{' "$f" | cut -c1-400; grep -E 'Error|Traceback' "$f" | head -3
done
python3 bench/torchplan_bench.py table "$OUT" > "$OUT/table.md" 2>&1
echo "total $(( $(date +%s) - T0 )) s"
cat "$OUT/table.md"

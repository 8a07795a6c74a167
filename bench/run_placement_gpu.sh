#!/usr/bin/env bash
# run_placement_gpu.sh — issue 46's GPU measurements in one go: the six programs of
# bench/placement_workloads.py (checkpointed GPT-2 and Llama training, Llama and GPT-2 generation
# with changing batch and prompt, ResNet-50 and ConvNeXt inference on changing batch and
# resolution), one process per allocator, ROUNDS rounds (default 3) with the allocators in turns
# (PyTorch native as a plain `python3`, vram under `python -m vram_torch run`, vram:CONF the same
# with VRAM_ALLOC_CONF=CONF, vram+plan[:CONF] with learned placement too, VRAM_STEP_PLAN=1
# (vram+plan+early[:CONF]: VRAM_STEP_PLAN=early, the plan made from the first step;
# vram+plan+layers[:CONF]: VRAM_STEP_PLAN=layers, a model's layers planned as the step;
# vram+plan+auto[:CONF]: VRAM_STEP_PLAN=auto, the kind of plan decided from the stream),
# docs/step_plan.md; the order reversed every other round), after one native round that
# records each program's allocation stream into $OUT/traces/NAME.trace.gz (memtrace v1, for
# `vram replay` on the CPU; RECORD=0 skips it). About 60 s a process on an H100, 90 s recording.
#   OUT=dir bench/run_placement_gpu.sh
#   OUT=dir RECORD=0 ROUNDS=2 ALLOCS="native vram vram+plan:chunk_size_mb:8,move_min_mb:64" \
#     WORKLOADS=ckpt_gpt2,ckpt_llama,gen_gpt2,infer_resnet50,infer_convnext bench/run_placement_gpu.sh
#   (the configuration docs/step_plan.md proposes beside plain vram, about 5 minutes on an H100;
#   gen_llama, whose replay the configuration leaves as it is, out to fit). Since large_moves
#   (docs/alloc_conf.md) both vram columns place with it: replayed, inference on changing shapes
#   holds 1.031-1.048 with 8 MiB chunks and plain vram less at the GPU's lag
#   (bench/results/2026-12-06-placement.md); compare with placement_fidelity.py without --base-conf.
#   Since chunk_divisor (default 16, docs/alloc_conf.md) plain vram maps a request's pages in chunks
#   of 1/16 of it; its measurement beside main's placement, about five minutes on an H100:
#   OUT=dir RECORD=0 ROUNDS=2 ALLOCS="native vram vram:chunk_divisor:0" \
#     WORKLOADS=ckpt_gpt2,ckpt_llama,gen_gpt2,infer_resnet50,infer_convnext bench/run_placement_gpu.sh
#   (vram+plan only with small chunks and chunk_divisor:0, e.g. vram+plan:chunk_size_mb:8,move_min_mb:64,
#   chunk_divisor:0: over the default chunks the plan holds more on checkpointed GPT-2).
# Writes machine.txt, build.log, one JSON and log per run, report.md; prints the table last.
set -u
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-3}
RECORD=${RECORD:-1}
ALLOCS=${ALLOCS:-native vram}
WORKLOADS=${WORKLOADS:-ckpt_gpt2,ckpt_llama,gen_llama,gen_gpt2,infer_resnet50,infer_convnext}
read -r -a kinds <<< "$ALLOCS"
for k in "${kinds[@]}"; do
  [[ $k =~ ^(native|vram(\+plan(\+early|\+layers|\+auto)?)?(:.+)?)$ ]] || { echo "ALLOCS: '$k' is not native, vram, vram:CONF, vram+plan[+early|+layers|+auto] or vram+plan[+early|+layers|+auto]:CONF"; exit 2; }
done
mkdir -p "$OUT/traces"
{ date -u; git rev-parse HEAD 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc;
  python3 -c 'import torch, transformers, timm, torchvision; print("torch", torch.__version__, "cuda", torch.version.cuda,
"transformers", transformers.__version__, "timm", timm.__version__, "torchvision", torchvision.__version__)'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
t0=$SECONDS
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b --target vram_torch -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "build: $((SECONDS - t0)) s"
export VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
[[ -f $VRAM_TORCH_LIBRARY ]] || VRAM_TORCH_LIBRARY=$(find "$PWD/b" -name libvram_torch.so | head -1)
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# one_run LABEL ALLOC [ARGS...]: one process of placement_workloads.py under ALLOC (native, vram, vram:CONF)
one_run() {
  local label=$1 alloc=$2; shift 2
  local t=$SECONDS rc
  if [[ $alloc == native ]]; then
    env -u VRAM_ALLOC_CONF timeout "${RUN_TIMEOUT:-240}" python3 bench/placement_workloads.py --workloads "$WORKLOADS" "$@" > "$OUT/$label.log" 2>&1
  else
    local conf="" plan=0; [[ $alloc == *:* ]] && conf=${alloc#*:}
    [[ $alloc == vram+plan* ]] && plan=1
    [[ $alloc == vram+plan+early* ]] && plan=early
    [[ $alloc == vram+plan+layers* ]] && plan=layers
    [[ $alloc == vram+plan+auto* ]] && plan=auto
    VRAM_STEP_PLAN=$plan VRAM_ALLOC_CONF=$conf timeout "${RUN_TIMEOUT:-240}" python3 -m vram_torch run \
      bench/placement_workloads.py --workloads "$WORKLOADS" "$@" > "$OUT/$label.log" 2>&1
  fi
  rc=$?
  echo "$label ($alloc): rc=$rc, $((SECONDS - t)) s"
  [[ $rc == 0 ]] || tail -15 "$OUT/$label.log"
}
if [[ $RECORD != 0 ]]; then
  one_run record native --trace-dir "$OUT/traces"
  gzip -f "$OUT"/traces/*.trace 2>/dev/null
  ls -l "$OUT/traces"
fi
for ((r = 1; r <= ROUNDS; r++)); do
  order=("${kinds[@]}")
  if (( r % 2 == 0 )); then  # reversed, so that neither allocator always runs first
    order=(); for ((i = ${#kinds[@]} - 1; i >= 0; i--)); do order+=("${kinds[$i]}"); done
  fi
  for k in "${order[@]}"; do
    one_run "r${r}_${k//[:,+]/_}" "$k" --out "$OUT/r${r}_${k//[:,+]/_}.json"
  done
done
echo "total: $((SECONDS - t0)) s"
shopt -s nullglob
jsons=("$OUT"/r*.json)
if (( ${#jsons[@]} )); then
  python3 bench/placement_workloads.py --report "${jsons[@]}" > "$OUT/report.md" 2>&1
  cat "$OUT/report.md"
else
  echo "NO RESULTS"; exit 1
fi

#!/usr/bin/env bash
# run_dp_gpu.sh — data parallel training on one GPU (issue 44), logs under $OUT (or ./gpu-out).
#   bench/run_dp_gpu.sh
# Builds vram (Release, into b/), then
#   1. tests/dist_check.py gpu: one rank of the NCCL engine, launched with torchrun's variables
#      (RANK=0 WORLD_SIZE=1, the TCP rendezvous on 127.0.0.1; no MPI, no network), against the
#      one-process GPU run: losses step by step, plain DDP, ZeRO-1, accumulation;
#   2. GPT-2 124M, B=8 T=1024 AdamW, 12 steps: one process, NCCL 1 rank DDP, NCCL 1 rank ZeRO-1,
#      and bf16 mixed precision one process and NCCL 1 rank (and mpirun -n 1 where Open MPI is
#      installed): step medians, communication and its hidden share, optimizer-state bytes;
# and prints a table last. libnccl.so.2 is looked for where PyTorch's wheel puts it when the
# loader does not know one (VRAM_LIBNCCL overrides).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
V=b/vram
CORPUS=b/data/kjv.txt
if [ -z "${VRAM_LIBNCCL:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  VRAM_LIBNCCL=$(python3 - <<'EOF' 2>/dev/null
import glob, os, site
roots = ["/usr/local/cuda*/lib64", "/usr/local/cuda*/targets/*/lib"]
roots += [os.path.join(d, "nvidia", "nccl", "lib") for d in site.getsitepackages() + [site.getusersitepackages()]]
for r in roots:
    hits = sorted(glob.glob(os.path.join(r, "libnccl.so.2*")))
    if hits:
        print(hits[0]); break
EOF
)
  export VRAM_LIBNCCL
fi
echo "libnccl: ${VRAM_LIBNCCL:-from the loader}"
# one machine, maybe no network: NCCL's own bootstrap on the loopback interface; its warnings shown
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_DEBUG=${NCCL_DEBUG:-WARN}

timeout 200 python3 tests/dist_check.py $V $CORPUS gpu > "$OUT/dist_check_gpu.log" 2>&1
echo "dist_check gpu rc=$? (0 passed, 77 skipped)"
cat "$OUT/dist_check_gpu.log"

TORCHRUN_VARS="RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1"
G="--data $CORPUS --model gpt2 --batch 8 --steps 12 --lr 3e-4 --log-every 1"
run() { # name, env, args...
  local name=$1 envs=$2; shift 2
  env $envs timeout 150 "$@" > "$OUT/gpt2_$name.log" 2>&1; echo "gpt2 $name rc=$?"
}
run one "" $V train --device cuda:0 $G
run nccl_ddp "$TORCHRUN_VARS MASTER_PORT=29531" $V train --device cuda $G --dist nccl
run nccl_zero1 "$TORCHRUN_VARS MASTER_PORT=29532" $V train --device cuda $G --dist nccl --zero 1
run one_bf16 "" $V train --device cuda:0 $G --precision bf16
run nccl_bf16 "$TORCHRUN_VARS MASTER_PORT=29533" $V train --device cuda $G --dist nccl --precision bf16
if command -v mpirun > /dev/null 2>&1; then
  run mpirun_nccl "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" mpirun -n 1 $V train --device cuda $G --dist nccl
fi

echo
echo "GPT-2 124M, B=8 T=1024 AdamW (fp32 unless _bf16), 12 steps ($(head -3 "$OUT/machine.txt" | tail -1 | cut -d, -f1)):"
printf "%-12s %12s %14s %16s %14s %12s\n" run "median step" "loss step 12" "opt state B" "comm ms" "hidden"
for f in "$OUT"/gpt2_*.log; do
  n=$(basename "$f" .log); n=${n#gpt2_}
  step=$(sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' "$f")
  loss=$(sed -n 's/^step 12\/12 | loss \([0-9.]*\).*/\1/p' "$f")
  opt=$(sed -n 's/^optimizer state: \([0-9]*\) bytes.*/\1/p' "$f")
  comm=$(sed -n 's/.*; communication \([0-9.]*\) ms, of it [0-9.]* ms (\([0-9]*%\)).*/\1 \2/p' "$f")
  printf "%-12s %12s %14s %16s %14s %12s\n" "$n" "${step:-FAILED}" "${loss:--}" "${opt:--}" ${comm:-- -}
done

#!/bin/sh
# compare_train_cpu.sh — `vram train` against PyTorch (Debian's python3-torch, CPU) on the same
# GPT configuration: median step time, tokens/s and memory. Prints the machine, the commands
# and the numbers; results go to bench/results/*-train-cpu.md.
#
# usage: bench/compare_train_cpu.sh [STEPS] [ROUNDS]   (after `make`)
# Needs Debian's PyTorch for the other side: apt-get install python3-torch libopenblas0-pthread
# (without OpenBLAS, Debian's torch falls back to the reference BLAS and is ~20x slower).
# Neither is a dependency of vram's build or tests.
# Config: 4 layers, 4 heads, width 128, context 64, batch 16, AdamW, clip 1.0, KJV bytes.
set -eu
STEPS=${1:-30}
ROUNDS=${2:-2}
CORPUS=build/data/kjv.txt
VRAM=./build/vram
[ -x "$VRAM" ] || { echo "build first: make" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "PyTorch not installed: apt-get install python3-torch" >&2; exit 2; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB RAM, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "vram: $($VRAM version 2>/dev/null | head -1); torch: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)"
echo "libblas.so.3 -> $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
for threads in 1 2; do
  for r in $(seq "$ROUNDS"); do
    cmd="$VRAM train --data $CORPUS --steps $STEPS --batch 16 --layers 4 --heads 4 --width 128 --context 64 --optimizer adamw --threads $threads"
    echo "\$ $cmd"
    $cmd | grep -E '^(summary|done)'
    cmd="/usr/bin/python3 bench/train_cpu_torch.py $CORPUS $STEPS 16 4 4 128 64 $threads"
    echo "\$ OPENBLAS_NUM_THREADS=$threads $cmd"
    OPENBLAS_NUM_THREADS=$threads $cmd 2>/dev/null | grep '^torch'
  done
done

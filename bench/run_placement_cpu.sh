#!/usr/bin/env bash
# run_placement_cpu.sh — issue 46 on the CPU: every recorded trace replayed with vram's placement
# and with learned placement (vram/step_plan.h) over it, as on a GPU (cudasim, and cudasim with
# the GPU's work 100 calls behind) and with free page moves (sim), by bench/bench_step_plan.
# The traces: the bundled ones (traces/*.trace.gz, traces/unseen, traces/recorded) and those
# bench/run_placement_gpu.sh recorded on a GPU, where they have been copied
# (bench/results/gpu-placement/traces/*.trace.gz, or GPU_TRACES=dir).
#   bench/run_placement_cpu.sh            (BUILD=dir to use another build folder; default build/)
# Prints the machine, the command and one table per device. Replays are deterministic: a
# second run prints the same figures.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(uname -sr)"
echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC'), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# command: $0 $*"
if [[ ! -x $BUILD/bench/bench_step_plan ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$BUILD" -j "$(nproc)" --target bench_step_plan > /dev/null
fi
traces=(traces/*.trace.gz traces/unseen/*.trace.gz traces/recorded/*.trace.gz)
gpu=${GPU_TRACES:-bench/results/gpu-placement/traces}
shopt -s nullglob
extra=("$gpu"/*.trace.gz "$gpu"/*.trace)
traces+=("${extra[@]}")
for dev in cudasim cudasim:lag=100 sim; do
  echo
  echo "## device $dev"
  "$BUILD/bench/bench_step_plan" --device "$dev" "${traces[@]}" | grep -v '^# \(machine\|command\)'
done
# What the 64 MiB chunks cost: vram alone on cudasim with smaller chunks (chunk_size_mb), ratio
# and device calls (maps + unmaps) per trace (per workload where a trace has several).
echo
echo "## vram alone on cudasim by chunk size: peak reserved / peak requested (device calls)"
for mb in 64 16 8 2; do
  "$BUILD/vram" replay --json --device cudasim --conf "chunk_size_mb:$mb" "${traces[@]}" 2> /dev/null |
    python3 -c '
import json, sys
mb = sys.argv[1]
cells = []
for line in sys.stdin:
    d = json.loads(line)
    name = d["trace"].split("/")[-1].replace(".trace.gz", "").replace(".trace", "")
    rows = [(name + ": " + w["name"], w["reserved_over_requested"], None) for w in d.get("workloads", [])] or \
           [(name, d["reserved_over_requested"], d["device_allocs"] + d["device_frees"])]
    cells += ["%s %.3f%s" % (n, r, "" if c is None else " (%d)" % c) for n, r, c in rows]
print("chunk %s MiB: %s" % (mb, "; ".join(cells)))' "$mb"
done

#!/usr/bin/env bash
# smi_cpu.sh — CPU cost of `vram smi -l 1` over a minute: runs it for N samples (default 60,
# one a second) in each output mode and prints the user+system CPU time the process used
# (bash's `times` for the finished child), as a percentage of one core over the wall time.
#
# usage: bench/smi_cpu.sh [VRAM_BINARY] [SAMPLES]
# Without a GPU, point VRAM_NVML_LIBRARY at the tests' fake NVML
# (build/tests/fakes/libfake_nvml.so); on a GPU machine leave it unset.
set -euo pipefail
VRAM=${1:-build/vram}
N=${2:-60}
echo "machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "nvml: ${VRAM_NVML_LIBRARY:-libnvidia-ml.so.1 (driver)}"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
printf '%-34s %8s %10s %10s %8s\n' "command" "wall s" "user ms" "sys ms" "% core"
for mode in "" "--json" "--csv"; do
    out=$(mktemp)
    start=$(date +%s.%N)
    bash -c "\"$VRAM\" smi -l 1 --count $N $mode > /dev/null; times" > "$out"
    end=$(date +%s.%N)
    # The second line of `times` is the children's: "0m0.012s 0m0.020s"
    read -r u s < <(sed -n 2p "$out" | awk '{print $1, $2}')
    rm -f "$out"
    to_ms() { echo "$1" | awk -Fm '{sub("s","",$2); printf "%.1f", ($1*60+$2)*1000}'; }
    um=$(to_ms "$u"); sm=$(to_ms "$s")
    awk -v w="$(echo "$end - $start" | bc)" -v u="$um" -v s="$sm" -v c="vram smi -l 1 --count $N $mode" \
        'BEGIN { printf "%-34s %8.1f %10.1f %10.1f %8.3f\n", c, w, u, s, (u+s)/10/w }'
done

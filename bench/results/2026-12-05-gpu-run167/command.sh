#!/usr/bin/env bash
# run 167 (2026-12-05 10:37 UTC, one NVIDIA H100 80GB HBM3, driver 580.159.04; machine.txt), tree 7ce24e0
# (the wheel build's fix): the two tests, then timing.sh (the large-pool cuts against
# base165 = `git archive 9a8bc36`, unpacked in the repository root, and PyTorch native, in turns).
# 2026-12-05-installed-on-gpu.md, 2026-12-05-size-classes.md
# run 167: gpu_test_installed_torch and pip_check after the fixes of runs 165-166, then run165b.sh
# (the large-pool cuts against base165 and PyTorch native, in turns); everything back as one file
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
t0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | grep 'Model name'; } > "$OUT/machine.txt" 2>&1
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b -j "$(nproc)" >> "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -20 "$OUT/build.log"; }
(cd b && timeout 220 ctest -R "gpu_test_installed_torch|pip_check" --output-on-failure -V) > "$OUT/retest.log" 2>&1
echo "retest rc=$? $(( $(date +%s) - t0 )) s"; grep -E "FAIL|passed, |tests passed|tests failed" "$OUT/retest.log" | cut -c1-300 | tail -12
ROUNDS=${ROUNDS:-3} FROUNDS=${FROUNDS:-3} ./run165b.sh > "$OUT/run165b.log" 2>&1; echo "timing rc=$? $(( $(date +%s) - t0 )) s"
tail -32 "$OUT/run165b.log"
tar -C "$OUT" -czf /tmp/all.tgz . && rm -rf "${OUT:?}"/* && mv /tmp/all.tgz "$OUT/all.tgz"

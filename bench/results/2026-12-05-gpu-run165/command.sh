#!/usr/bin/env bash
# run 165 (2026-12-05 09:59 UTC, one NVIDIA H100 80GB HBM3, driver 580.159.04; machine.txt), tree b4e3b48:
# the gpu label and pip_check/install_check (bench/results/2026-12-05-installed-on-gpu.md). Run from the
# repository root as ./run165a.sh.
# run 165a: the gpu label (with gpu_test_installed_torch's pip install) plus pip_check and install_check
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -r; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; python3 -m pip --version; which python3; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
t0=$(date +%s)
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"; grep Python3_EXECUTABLE b/CMakeCache.txt
(cd b && timeout 300 ctest --output-on-failure -L gpu -E multi_gpu -V) > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$? $(( $(date +%s) - t0 )) s"
(cd b && timeout 150 ctest --output-on-failure -R "pip_check|install_check" -V) > "$OUT/pip_tests.log" 2>&1; echo "pip tests rc=$? $(( $(date +%s) - t0 )) s"
grep -hE "^ *[0-9]+/[0-9]+ Test|tests passed|tests failed|FAIL|Skipped|checks" "$OUT/gpu_tests.log" "$OUT/pip_tests.log" | tail -40

#!/usr/bin/env bash
# run 166 (2026-12-05 10:17 UTC, one NVIDIA H100 80GB HBM3), tree e94aa50: the two tests after their fixes,
# then run165b.sh (an earlier form of ../2026-12-05-gpu-run167/timing.sh, with base165 = `git archive 9a8bc36`
# unpacked in the repository root); cut short: bench/run_gpu.sh packed its folder, and only 8 files come back.
# rt.log is a third call's (ctest -R gpu_test_installed_torch -V, 10:21) output. 2026-12-05-installed-on-gpu.md
# run 166: the two fixed tests again (gpu_test_installed_torch's pip install, pip_check's no-cmake
# check), then run165b.sh (the large-pool cuts against base165, with PyTorch native, in turns)
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
t0=$(date +%s)
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b -j "$(nproc)" >> "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -20 "$OUT/build.log"; exit 1; }
(cd b && timeout 200 ctest -R "gpu_test_installed_torch|pip_check" --output-on-failure -V) > "$OUT/retest.log" 2>&1
echo "retest rc=$? $(( $(date +%s) - t0 )) s"; grep -E "FAIL|passed, |tests passed|tests failed" "$OUT/retest.log" | tail -8
ROUNDS=${ROUNDS:-3} FROUNDS=${FROUNDS:-3} ./run165b.sh > "$OUT/run165b.log" 2>&1; echo "timing rc=$? $(( $(date +%s) - t0 )) s"
grep -v "^latency round\|^latrounds" "$OUT/run165b.log" | tail -40

# run 103 (2026-12-04 ~10:25 UTC): the gpu label on the final tree of the session (bd32b66: the
# capture-end fix of e868ecc, empty tensors, the test changes), the H200 of gpu-run95/machine.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j16
(cd build-gpu && ctest -L gpu -V | grep -E "passed|failed|FAIL|SKIP|Error")

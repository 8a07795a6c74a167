# run 150 (2026-12-04 21:34 UTC), the H200 of machine.txt: the C and streams tests of the gpu label
# on ad45c65 (the final tree: expandable_segments at run time, all-or-nothing
# settings): cuda_alloc 295, cuda_device 60, the PyTorch streams test 6,002 passed; the two-GPU test
# skipped (one GPU lent); the plug-in test ran in run 149.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16
(cd b && ctest --output-on-failure -L gpu -E "gpu_test_torch_plugin" -V) > $OUT/gpu_tests.log 2>&1

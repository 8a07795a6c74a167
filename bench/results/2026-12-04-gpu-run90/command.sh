# run 90: the final tree of the busy-page-edges fix (ae3c2af): the CTest `gpu` label and every CPU
# test, then test_cuda_alloc three more times (its busy-edge cases, now asserting their layout).
OUT=$OUT bash bench/run_gpu.sh tests
for i in 1 2 3; do ./b/tests/gpu_test_cuda_alloc 2>&1 | grep -E "busy edge|passed|FAIL"; done > $OUT/busy_edge.log 2>&1

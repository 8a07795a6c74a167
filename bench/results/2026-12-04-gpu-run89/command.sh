# run 89: the CTest `gpu` label and every CPU test on this tree (busy pages moved only where the
# requesting stream alone can use them), then test_cuda_alloc three times against the allocator
# before the fix (.devcarry/oldfix: this tree with src/memory/pages.c and allocator.c from 31d99d9)
# and three times against the fixed one.
OUT=$OUT bash bench/run_gpu.sh tests
cd .devcarry/oldfix && cmake -S . -B bo -DCMAKE_BUILD_TYPE=Release > $OUT/oldfix_build.log 2>&1 && cmake --build bo -j 16 --target gpu_test_cuda_alloc >> $OUT/oldfix_build.log 2>&1
for i in 1 2 3; do echo "== old allocator, new test, run $i"; ./bo/tests/gpu_test_cuda_alloc 2>&1 | grep -E "busy edge|passed|FAIL"; done > $OUT/oldfix_gpu.log 2>&1
cd ../..
for i in 1 2 3; do echo "== fixed allocator run $i"; ./b/tests/gpu_test_cuda_alloc 2>&1 | grep -E "busy edge|passed|FAIL"; done > $OUT/fixed_gpu.log 2>&1

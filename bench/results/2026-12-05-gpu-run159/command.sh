# run 159 (2026-12-05 ~02:55 UTC, one NVIDIA H200, driver 580.159.04): the gpu label on the final
# tree 60a8421 (after the review's with_allocator_or_idle refactor of plugin.cpp). Output as printed:
#   1/4 Test #17: gpu_test_cuda_alloc ..............   Passed    1.58 sec
#   2/4 Test #18: gpu_test_cuda_device .............   Passed    0.62 sec
#   3/4 Test #36: gpu_test_torch_plugin ............   Passed   76.88 sec
#   4/4 Test #37: gpu_test_torch_streams ...........   Passed    6.71 sec
#   100% tests passed out of 4
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16
(cd b && ctest -L gpu -E multi_gpu --output-on-failure)

# run 140 (2026-12-04 19:21 UTC), the H200 of machine.txt, on ccca3f5 (vram_allocator_set_caching
# and the class-size rule for held blocks in the core): gpu_test_cuda_alloc 295 checks,
# gpu_test_cuda_device 60, test_torch_streams 6,002, all passed. The plug-in test stopped at its
# new caching check: PyTorch 2.11 has no torch.cuda.memory.caching_allocator_disabled() (the
# source read was newer); the check now calls caching_allocator_enable(False/True).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release
cmake --build b -j16 --target vram_torch gpu_test_cuda_alloc gpu_test_cuda_device
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
(cd b && ./tests/gpu_test_cuda_alloc > $OUT/cuda_alloc.log 2>&1; ./tests/gpu_test_cuda_device > $OUT/cuda_device.log 2>&1)
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1
python3 tests/gpu/test_torch_streams.py b/libvram_torch.so > $OUT/streams.log 2>&1

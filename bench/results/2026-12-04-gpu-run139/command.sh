# run 139 (2026-12-04 19:14 UTC), the H200 of machine.txt, on 28ac297: the PyTorch plug-in test
# (91 checks: the out-of-memory error now opens "CUDA out of memory. Tried to allocate", and
# accelerate's should_reduce_batch_size, which find_executable_batch_size uses, recognises it)
# and the streams test (6,002 checks) on the final plug-in.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1
python3 tests/gpu/test_torch_streams.py b/libvram_torch.so > $OUT/streams.log 2>&1

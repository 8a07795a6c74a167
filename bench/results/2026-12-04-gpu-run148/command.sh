# run 148 (2026-12-04 20:58 UTC), the H200 of machine.txt: the PyTorch plug-in test on bd80598
# (vram_torch.AllocatorSettingsError): 95 passed, among them a bad _set_allocator_settings value
# raising RuntimeError as under PyTorch's own allocator, and the run-time settings check of run 143.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1

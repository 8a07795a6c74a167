# run 138 (2026-12-04 19:11 UTC), the H200 of machine.txt, on 692084c: the PyTorch plug-in test,
# 90 checks passed, with torch.accelerator's memory functions answering from vram (memory_allocated,
# max_memory_allocated, memory_stats, memory_reserved, reset_peak_memory_stats, empty_cache).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1

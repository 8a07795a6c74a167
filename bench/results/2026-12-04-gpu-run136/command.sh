# run 136 (2026-12-04 18:59 UTC), same command as run 134, on 3501817: the PyTorch plug-in test
# passes, 85 checks, among them PYTORCH_ALLOC_CONF and _set_allocator_settings set by a script
# before its first CUDA tensor under `python -m vram_torch run` (segments model,
# garbage_collection_threshold 0.6, roundup_power2_divisions 4 in force), backend:cudaMallocAsync
# named as left out once, and _set_allocator_settings on a running allocator: quiet for what it
# already has, one warning for a change.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1

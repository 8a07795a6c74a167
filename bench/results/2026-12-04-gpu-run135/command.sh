# run 135 (2026-12-04 18:57 UTC), same command as run 134, with torch.cuda.memory._set_allocator_settings
# routed to vram and PyTorch's own call made after vram's. Two checks failed, both teaching:
# PyTorch 2.11's _set_allocator_settings warns that it is deprecated (the check counted that
# warning as vram's), and under a pluggable allocator, with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
# PyTorch's own call fails an internal assertion ("Allocator backend parsed at runtime != allocator
# backend parsed at load time, cudaMallocAsync != pluggable"). vram_torch now routes
# torch._C._accelerator_setAllocatorSettings and runs PyTorch's call only for pinned_* options.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1

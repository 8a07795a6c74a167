# run 134 (2026-12-04 18:51 UTC), the H200 of machine.txt (the same host as run 132): the PyTorch
# plug-in test with the first form of PyTorch's allocator settings under vram (src/torch/torch_conf.cpp).
# It found that PyTorch 2.11 reads PYTORCH_CUDA_ALLOC_CONF before PYTORCH_ALLOC_CONF (with both set,
# its expandable segments follow PYTORCH_CUDA_ALLOC_CONF), where vram had read PYTORCH_ALLOC_CONF
# first: the one failed check; vram's order was changed to PyTorch's.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1

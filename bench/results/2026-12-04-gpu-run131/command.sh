# runs 130 (~17:59 UTC) and 131 (~18:01 UTC), the H200: the PyTorch plug-in test with the
# pluggable-allocator patch (cacheInfo and recordStream). Run 130's version checked a one-rank
# NCCL all_reduce (failed: no recordStream from ProcessGroupNCCL, run130_plugin_test.txt); run
# 131's checks PyTorch's own C++ Tensor.record_stream instead (81 passed).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so

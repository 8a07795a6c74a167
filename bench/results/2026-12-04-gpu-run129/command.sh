# runs 128 (~17:53 UTC, tree 25a51d7) and 129 (~17:55 UTC, with src/torch/cache_info.cpp), the H200:
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
for m in native vram; do python3 cudnn_probe.py $m; done
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so   # run 129 only: 80 passed

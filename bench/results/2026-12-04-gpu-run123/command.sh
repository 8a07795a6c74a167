# run 123 (2026-12-04 ~17:32 UTC), the tree of 1067082 on the H200 (driver 580.159.04, PyTorch
# 2.11.0+cu130): the PyTorch plug-in test, 76 passed, with the out-of-memory observer attached
# through torch._C._cuda_attach_out_of_memory_observer (called once with the device, the bytes
# asked, the limit and the free bytes; the snapshot it dumped holds the oom event with its
# Python stack) and the history's Python stacks (run 122's checks).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so

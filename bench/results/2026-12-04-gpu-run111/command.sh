# run 111 (2026-12-04 ~15:15 UTC): the PyTorch plug-in test after the review commit (the live
# check's addresses sorted by the plug-in only); the H200 of run 110 (machine.txt copied: same
# machine, same session). 70 passed.
export PYTHONPATH=$PWD/python
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/test_torch_plugin.log 2>&1

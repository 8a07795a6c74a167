# run 121 (2026-12-04 ~17:23 UTC), 823048b's tree before its test fix: the PyTorch plug-in test
# (73 of 74: the expected line of the calling statement was computed wrong) and
# bench/history_cost.py under native, then vram.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so
for a in native vram; do python3 bench/history_cost.py --alloc $a --steps 40 --out $OUT/history_$a.json; done

# run 122 (2026-12-04 ~17:26 UTC), a fresh machine, the tree of 823048b plus the test's fix: the
# PyTorch plug-in test (74 passed) and bench/history_cost.py twice, vram and native in turns.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so
for r in 1 2; do for a in vram native; do
  python3 bench/history_cost.py --alloc $a --steps 60 --out $OUT/history_${a}_r$r.json; done; done

# run 118 (2026-12-04 ~16:20 UTC, H200, driver 580.159.04, PyTorch 2.11.0+cu130): the PyTorch
# plug-in test on 79ec6ae (graph_trees' lock, sweeps at CUDA graph captures and resets): 70 passed;
# its reduce-overhead workout: 6 restores, 13 recreated, 10 adopted, 0 left.
export PYTHONPATH=$PWD/python
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/test_torch_plugin.log 2>&1

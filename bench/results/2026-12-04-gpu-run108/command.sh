# run 108 (2026-12-04 ~14:18 UTC): the two PyTorch GPU tests on 1f738a3 (the plug-in's bind and
# route exports merged into vram_torch_graph_pool_stream after run 107), the H200 of run 107
# (machine.txt copied from gpu-run107: the same machine, the same session)
export PYTHONPATH=$PWD/python
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
for t in test_torch_plugin test_torch_streams; do python3 tests/gpu/$t.py b/libvram_torch.so > $OUT/$t.log 2>&1; done

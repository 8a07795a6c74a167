# runs 109a/109 (2026-12-04 ~14:35 UTC), the H200 of run 107 (machine.txt copied: same machine,
# same session): the PyTorch plug-in test with a use_mem_pool section. First
# (test_torch_plugin_before.log) it expected torch.cuda.MemPool() to work and failed: PyTorch
# 2.11 refuses to create a MemPool under any pluggable allocator ("pluggable does not yet support
# createOrIncrefPool"), so docs/pytorch.md's old claim (allocations inside use_mem_pool come from
# vram's ordinary cache) was wrong; the test now checks that refusal (test_torch_plugin.log: 70
# passed) and the docs say so.
export PYTHONPATH=$PWD/python
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/test_torch_plugin.log 2>&1

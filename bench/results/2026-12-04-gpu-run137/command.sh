# run 137 (2026-12-04 19:08 UTC), the H200 of machine.txt, on the tree after a111cc8: what PyTorch
# 2.11's other memory entry points do under vram (probe.py, kept here; probe.log), then the
# plug-in test (plugin.log: 86 checks, among them that vram's memory_stats() has every key of
# PyTorch's own). Found: torch.accelerator.memory_stats / memory_allocated / max_memory_allocated
# answer 0 under the pluggable allocator and reset_peak_memory_stats raises "Invalid device
# argument" (routed to vram since: run 138); caching_allocator_enable(False) silently does
# nothing, and torch._C._cuda_cudaCachingAllocator_is_enabled, which PyTorch's own
# caching_allocator_disabled() calls, does not exist in 2.11 (left as PyTorch's).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 .devcarry/probe.py > $OUT/probe.log 2>&1     # bench/results/2026-12-04-gpu-run137/probe.py
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1

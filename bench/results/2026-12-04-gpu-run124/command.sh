# run 124 (2026-12-04 ~17:37 UTC), the tree of c0827d5 (profiler hooks) on the H200: the PyTorch
# plug-in test (78 passed: the profiler sees aten::empty's 8 MiB and its free), then GPT-2
# sampling's step time, native and vram in turns, two rounds (ab.md: vram +10.2% by medians,
# +3.1% ... +13.8% by the fastest calls: two calls counted a process, too few on this host; see
# 2026-12-04-plugin-hooks.md).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so
for r in 1 2; do for k in native vram; do
  taskset -c 2-5 python3 bench/torch_workloads.py --alloc $k --steps 8 --workloads gpt2_generate --out /tmp/ab/ab_r${r}_$k.json
done; done
python3 bench/ab_rounds.py --workload gpt2_generate /tmp/ab/ab_r*.json

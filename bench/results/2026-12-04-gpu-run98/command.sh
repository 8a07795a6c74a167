# runs 98-99 (2026-12-04, ~09:30 UTC, the H200 of gpu-run95/machine.txt), on the tree with empty
# tensors served without memory (src/torch/plugin.cpp):
# run 98: the gpu label (test_cuda_alloc 295, test_cuda_device 60, test_torch_plugin 64 with the
#   three new checks on empty tensors, test_torch_streams 6002; the two-GPU test skipped)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j16
(cd build-gpu && ctest -L gpu -V)
# run 99: test_torch_streams under run 96's c6 (move_busy_pages:False) with seeds 2 and 3, whose one
#   failed check in run 96 had no log: 5982 and 6020 passed, 0 failed, with 36 and 28 unmaps (the
#   old "memory moved" check wanted more than 100); then GPT-2 sampling (3 calls) under native and
#   vram, one process each (report.md, wl_*.json)
L=$PWD/build-gpu/libvram_torch.so; export VRAM_TORCH_LIBRARY=$L PYTHONPATH=$PWD/python
for seed in 2 3; do VRAM_ALLOC_CONF="chunk_size_mb:4,move_min_mb:4,reserve_slack:0,move_busy_pages:False" python3 tests/gpu/test_torch_streams.py $L --seed $seed; done
for k in native vram; do python3 bench/torch_workloads.py --alloc $k --steps 3 --workloads gpt2_generate --out $OUT/wl_$k.json > $OUT/wl_$k.log 2>&1; done
python3 bench/torch_workloads.py --report $OUT/wl_*.json

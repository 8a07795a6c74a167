# run 161 (2026-12-05 04:46-04:50 UTC, one NVIDIA H200, driver 580.159.04; machine.txt), tree 60e6bb9:
# the random latency workload, warm, under vram, the floor allocator (bench/bench_random_floor.c) and
# PyTorch native in turns on one pinned core, with bench_random_split through the CUDA device and
# cudasim, 3 rounds (floor_rounds.md; bench/results/2026-12-05-random-floor.md)
ROUNDS=3 bench/run_gpu.sh floor

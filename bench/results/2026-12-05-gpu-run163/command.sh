# run 163 (2026-12-05 05:25-05:26 UTC, one NVIDIA H200, driver 580.159.04; machine.txt), tree 67deb3a:
# the random latency workload, warm, under vram, the floor allocator and the harness alone
# (bench/bench_random_floor.c), all sizes and each pool's alone (--sizes small|large), with
# PyTorch native and bench_random_split in turns on one pinned core, 4 rounds
# (floor_rounds.md; bench/results/2026-12-05-random-pools.md)
ROUNDS=4 bench/run_gpu.sh floor

OUT=$OUT ROUNDS=2 PIN=3 bash bench/run_gpu.sh tests latrounds   # tree d3276b6 (main at the start of the 2026-12-03 evening session)

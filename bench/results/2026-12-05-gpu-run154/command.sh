# run 154 (2026-12-05, one NVIDIA H200 of machine.txt): ab sampling on a5234dd (main, this session's tree: allocator unchanged since 2026-12-04)
ROUNDS=4 STEPS=6 WL_TIMEOUT=120 bench/run_gpu.sh ab

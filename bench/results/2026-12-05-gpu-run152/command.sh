# run 152 (2026-12-05, one NVIDIA H200 of machine.txt): latrounds on a5234dd (main, this session's tree: allocator unchanged since 2026-12-04)
ROUNDS=3 bench/run_gpu.sh latrounds

# run 153 (2026-12-05, one NVIDIA H200 of machine.txt): workloads on a5234dd (main, this session's tree: allocator unchanged since 2026-12-04)
KINDS="native vram expandable" WL_TIMEOUT=180 bench/run_gpu.sh workloads

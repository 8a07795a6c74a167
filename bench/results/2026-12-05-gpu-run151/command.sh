# run 151 (2026-12-05, one NVIDIA H200 of machine.txt): tests on a5234dd (main, this session's tree: allocator unchanged since 2026-12-04)
bench/run_gpu.sh tests

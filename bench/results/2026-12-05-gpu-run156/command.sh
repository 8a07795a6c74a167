# run 156 (2026-12-05, one NVIDIA H200 of machine.txt): ab llama on a5234dd (main, this session's tree: allocator unchanged since 2026-12-04)
AB_WORKLOAD=llama_train ROUNDS=4 STEPS=12 WL_TIMEOUT=120 bench/run_gpu.sh ab

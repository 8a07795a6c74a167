# run 155 (2026-12-05, one NVIDIA H200 of machine.txt): extra workloads on a5234dd (main, this session's tree: allocator unchanged since 2026-12-04)
KINDS="native vram" WL_TIMEOUT=240 WORKLOADS=vit_train,llama_train,t5_varlen_train,effnet_infer bench/run_gpu.sh workloads

KINDS="native vram vram:chunk_size_mb:2,move_min_mb:2 native2" WORKLOADS=gpt2_generate STEPS=4 bash bench/run_gpu.sh workloads   # tree 991c8be; files wl_KIND.json with ':' and ',' written as '_'

OUT=$OUT KINDS="native vram expandable" bash bench/run_gpu.sh workloads   # tree d3276b6

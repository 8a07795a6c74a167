OUT=$OUT KINDS="native vram" bash bench/run_gpu.sh workloads   # tree e82b852 (the biased lock)

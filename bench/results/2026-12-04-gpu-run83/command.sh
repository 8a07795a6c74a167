OUT=$OUT bash bench/run_gpu.sh latency   # tree e82b852 (the biased lock)

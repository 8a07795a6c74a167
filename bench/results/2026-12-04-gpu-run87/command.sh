OUT=$OUT bash bench/run_gpu.sh tests latency   # tree a4a19cc (the lock biased at most once)

# run 63: latency in turns against the build before this session's commit (the allocator struct
# grew by two fields at its end)
OUT=$OUT BASE=.devcarry/base ROUNDS=3 bash bench/run_gpu.sh latrounds 2>&1 | tail -12

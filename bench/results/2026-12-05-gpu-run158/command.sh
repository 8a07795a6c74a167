# run 158 (2026-12-05 02:22 UTC, one NVIDIA H200, driver 580.159.04; cpu.txt): where the random
# latency workload's time goes, vram's CUDA device and cudasim in turns on one pinned core
# (bench/bench_random_split.c), to settle whether the CUDA device costs more than the simulated one
# (run 94 suggested 87-120 ns against 72, but from one cudasim run after three CUDA ones).
# Result: in turns, CUDA 118.4-123.3 ns per allocator call, cudasim 111.4-114.3 (+7%), almost all of
# it in large mallocs (242-250 ns against 204-209); the host was slow this hour (run 94: 87-120).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target bench_random_split
for i in 1 2 3; do taskset -c 3 ./b/bench/bench_random_split cuda:0 > $OUT/split_cuda_$i.txt 2>&1; taskset -c 3 ./b/bench/bench_random_split cudasim > $OUT/split_cudasim_$i.txt 2>&1; done

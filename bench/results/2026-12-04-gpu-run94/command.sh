# run 94: where the random latency workload's time goes on the H200 machine's host, by kind of call
# (bench/bench_random_split.c), three runs through vram's CUDA device and one through cudasim, on
# one pinned core. Each file prints its machine, date and command.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target bench_random_split bench_alloc_latency
for i in 1 2 3; do taskset -c 3 ./b/bench/bench_random_split cuda:0 > $OUT/split_cuda_$i.txt 2>&1; done
taskset -c 3 ./b/bench/bench_random_split cudasim > $OUT/split_cudasim.txt 2>&1

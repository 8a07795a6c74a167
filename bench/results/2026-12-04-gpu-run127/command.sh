# run 127 (2026-12-04 ~17:42 UTC): GPT-2 sampling under vram, the session's starting tree
# (605d575, "base", a git archive carried as .devcarry/base) and c0827d5 ("head") in turns, three
# rounds, one process each, pinned to cores 2-5 (runs 125-126 lost their builds between calls and
# measured nothing). Step times per process in r*_{base,head}.json ("step_times_s"; the first call
# includes warm-up): base 2.25-2.61 s, head 2.26-3.49 s after the first call; by round, head/base
# 1.52, 0.94, 1.25 (medians), 1.51, 0.90, 1.03 (fastest): this host's noise is larger than any
# cost of the change, which bench_torch_plugin measures instead (2026-12-04-plugin-hooks.md).
(cmake -S .devcarry/base -B ob -DCMAKE_BUILD_TYPE=Release && cmake --build ob -j8 --target vram_torch) &
(cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j8 --target vram_torch) & wait
run_one() { taskset -c 2-5 env VRAM_TORCH_LIBRARY=$2 python3 $1/bench/torch_workloads.py --alloc vram --steps 8 --workloads gpt2_generate --out $3; }
for r in 1 2 3; do run_one $PWD/.devcarry/base $PWD/ob/libvram_torch.so r${r}_base.json; run_one $PWD $PWD/b/libvram_torch.so r${r}_head.json; done

# run 149 (2026-12-04 21:24 UTC), the H200 of machine.txt: the final tree of the night session
# (201098f: expandable_segments at run time, in_pages in bin_best) -- the PyTorch plug-in test, 96
# passed (a 3 GiB tensor made while expandable_segments is off lies in a segment; settings quiet;
# rounding at run time; a bad setting raises RuntimeError), then the latency benchmark with the
# tree of runs 144-147 (0d9df88, "base", carried in .devcarry/base) and PyTorch native in turns on
# one pinned core, three rounds: the host was in a slow stretch for both builds (pairs 32-37 ns),
# vram at or below base in every column (pairs 0.074-0.095 of native, base 0.079-0.098; random
# 0.308 cold / 0.174 warm, base 0.329 / 0.180): no cost from the change.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.log 2>&1
BASE=.devcarry/base ROUNDS=3 bash bench/run_gpu.sh latrounds

# run 114 (2026-12-04 ~15:50 UTC, H200 of gpu.txt: NVIDIA H200, driver 580.159.04; PyTorch 2.11.0+cu130):
# reduce-overhead with checkpoint restores. A discarded native run first (Inductor's cache warm),
# then the plug-in test, then the workout in the order native, vram, native#2, vram#2. The
# device tool brings back 8 files at most: vram#2's and the warm-up's files did not come back;
# vram#2's table row, from the command's output:
#   | vram | all matched | 6 | 106954752 | 2.64 | 68158456 |  (restores 6, recreated 13, adopted 10, 0 left)
# (the files' loop wrote workout_native.txt, workout_vram2.txt, workout_native22.txt, workout_vram222.txt;
# renamed here native, vram, native2).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
python3 bench/graph_trees_workout.py native > $OUT/workout_warmup.txt 2>&1
python3 tests/gpu/test_torch_plugin.py b/libvram_torch.so > $OUT/plugin.txt 2>&1
for k in native vram native vram; do python3 bench/graph_trees_workout.py $k --json $OUT/workout_$k$r.json > $OUT/workout_$k$r.txt 2>&1; r=${r}2; done

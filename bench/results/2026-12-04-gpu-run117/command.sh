# run 117 (2026-12-04 ~16:00 UTC, the H200 of machine.txt): on 287c8fe (private pools in bins),
# BERT varlen with its model compiled by torch.compile(mode="reduce-overhead"), vram first (cold
# Inductor cache: its steps 1, 2 and 4 compiled), then native; then every CPU test and the gpu label
# (295 + 60 checks, the plug-in test 70, the streams test 6,002; the two-GPU test skipped).
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
for k in vram native; do timeout 200 python3 bench/torch_workloads.py --alloc $k --compile reduce-overhead --steps 6 --workloads bert_varlen --out "$OUT/wl/wl_$k.json" > "$OUT/wl/wl_$k.log" 2>&1; done
python3 bench/torch_workloads.py --report $OUT/wl/wl_*.json > $OUT/wl/report.md
export OUT=$OUT; bash bench/run_gpu.sh tests

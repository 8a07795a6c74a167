# run 116 (2026-12-04 ~15:48 UTC, H200, driver 580.159.04, PyTorch 2.11.0+cu130): the three training
# workloads with their models compiled by torch.compile(mode="reduce-overhead"), on 34903bc (before
# the private pools' bins): native (cold Inductor cache: it ran out of its 190 s limit, no JSON;
# wl_native_tail.log is the end of its log), vram (also killed at 190 s, after writing its JSON: the
# process lingered at exit), native#2.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
for k in native vram native#2; do timeout 190 python3 bench/torch_workloads.py --alloc $k --compile reduce-overhead --steps 6 --workloads resnet50_train,gpt2_train,bert_varlen --out "$OUT/r/wl_$k.json" > "$OUT/r/wl_$k.log" 2>&1; done
python3 bench/torch_workloads.py --report $OUT/r/wl_*.json > $OUT/r/report.md

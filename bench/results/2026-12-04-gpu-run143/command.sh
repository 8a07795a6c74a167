# run 143 (2026-12-04 20:29 UTC), the H200 of gpu-run142/machine.txt (driver 580.159.04, torch
# 2.11.0+cu130): on 50ec355, whether torch.cuda.memory._set_allocator_settings changes an
# allocator that already runs. PyTorch's own does (probe.txt: a 5 MiB + 1 request takes 5,243,392
# bytes, then 6,291,456 after roundup_power2_divisions:4, then 5,243,392 after :1); vram before
# 50ec355 noted the call and kept its rounding; vram now follows it byte for byte. Then the gpu
# label: cuda_alloc 295, cuda_device 60, the plug-in test 94 (the settings check rewritten for
# run-time application), streams 6,002; the two-GPU test skipped (one GPU lent).
D=bench/results/2026-12-04-gpu-run143
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
for k in native vram; do python3 $D/probe_settings.py $k 2>&1 | grep -v Warning; done | tee $OUT/probe.txt
(cd b && ctest --output-on-failure -L gpu -V) > $OUT/gpu_tests.log 2>&1

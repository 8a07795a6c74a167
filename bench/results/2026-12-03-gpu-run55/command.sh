OUT2=$OUT; OUT=/tmp/o; mkdir -p $OUT
OUT=$OUT bash bench/run_gpu.sh build-only > /dev/null 2>&1; tail -1 $OUT/build.log
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
PYTHONUNBUFFERED=1 timeout 400 taskset -c 5 python3 bench/torch_workloads.py --alloc vram --steps 8 --trace $OUT/full_vram.trace --out $OUT/full_vram.json > $OUT/full_vram.log 2>&1
echo "rc=$?"; grep -o '"workload": "[a-z0-9_]*"\|"reserved_over_requested": [0-9.]*\|"peak_requested": [0-9]*' $OUT/full_vram.log | paste - - - ; grep "^trace" $OUT/full_vram.log
gzip $OUT/full_vram.trace; ls -la $OUT
tar -czf $OUT2/run54.tgz -C $OUT .

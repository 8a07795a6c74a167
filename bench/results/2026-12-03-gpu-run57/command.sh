O=/tmp/o; mkdir -p $O
(cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch) > $O/build.log 2>&1 || { echo BUILD FAILED; tail -20 $O/build.log; }
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
PYTHONUNBUFFERED=1 timeout 300 taskset -c 5 python3 bench/torch_workloads.py --alloc vram --steps 8 --trace $O/workloads_h200.trace --out $O/full_vram.json > $O/full_vram.log 2>&1
echo "rc=$?"; grep -o '"workload": "[a-z0-9_]*"\|"reserved_over_requested": [0-9.]*' $O/full_vram.log | paste - - ; grep "^trace" $O/full_vram.log; tail -3 $O/full_vram.log
grep -c "^# sync" $O/workloads_h200.trace; gzip $O/workloads_h200.trace
tar -czf $OUT/run57.tgz -C $O .

# run 58: poll-before-alias (working tree, b/) against main (base, ob/): gpt2_train step time in turns, then the four workloads
O=/tmp/o; mkdir -p $O
OUT=$O bash bench/run_gpu.sh build-only > /dev/null 2>&1; tail -1 $O/build.log
(cmake -S .devcarry/base -B ob -DCMAKE_BUILD_TYPE=Release && cmake --build ob -j16 --target vram_torch) > $O/base_build.log 2>&1 || { echo BASE BUILD FAILED; tail -5 $O/base_build.log; }
ls b/libvram_torch.so ob/libvram_torch.so
export PYTHONPATH=$PWD/python
for r in 1 2 3 4 5; do
  for k in native vram base; do
    case $k in
      base) lib=$PWD/ob/libvram_torch.so; alloc=vram:caching:True ;;
      *) lib=$PWD/b/libvram_torch.so; alloc=$k ;;
    esac
    VRAM_TORCH_LIBRARY=$lib PYTHONUNBUFFERED=1 timeout 200 taskset -c 2-5 python3 bench/torch_workloads.py --alloc $alloc --steps 18 --workloads gpt2_train --out $O/ab_r${r}_$k.json > $O/ab_r${r}_$k.log 2>&1
    echo "ab $r $k rc=$?"
  done
done
python3 bench/ab_rounds.py --workload gpt2_train $O/ab_r*.json | tee $O/ab.md
export VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
PYTHONUNBUFFERED=1 timeout 300 taskset -c 5 python3 bench/torch_workloads.py --alloc vram --steps 8 --trace $O/full.trace --out $O/wl_vram.json > $O/wl_vram.log 2>&1
echo "wl rc=$?"; python3 bench/torch_workloads.py --report $O/wl_vram.json | tee $O/workloads.md | tail -8
gzip $O/full.trace
tar -czf $OUT/run58.tgz -C $O .

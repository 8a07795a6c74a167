# run 60: vram's own allocation stream of each extra workload (for replay on a CPU), and
# vit_train's step time in turns (native, vram; 4 rounds)
O=/tmp/o; mkdir -p $O
OUT=/tmp/ob bash bench/run_gpu.sh build-only > /dev/null 2>&1; tar -xzOf /tmp/ob/gpu-out.tgz ./build.log | tail -1
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
for w in vit_train llama_train t5_varlen_train effnet_infer; do
  PYTHONUNBUFFERED=1 timeout 200 taskset -c 2-5 python3 bench/torch_workloads.py --alloc vram --steps 8 --workloads $w --trace $O/$w.vram.trace --out $O/tr_$w.json > $O/tr_$w.log 2>&1
  echo "trace $w rc=$?"; grep -o '"reserved_over_requested": [0-9.]*' $O/tr_$w.log; gzip -9 $O/$w.vram.trace
done
for r in 1 2 3 4; do
  for k in native vram; do
    PYTHONUNBUFFERED=1 timeout 200 taskset -c 2-5 python3 bench/torch_workloads.py --alloc $k --steps 18 --workloads vit_train --out $O/ab_r${r}_$k.json > $O/ab_r${r}_$k.log 2>&1
    echo "ab $r $k rc=$?"
  done
done
python3 bench/ab_rounds.py --workload vit_train $O/ab_r*.json | tee $O/ab.md | tail -4
tar -czf $OUT/run60.tgz -C $O .

# run 61: the four extra workloads in one process under vram with its trace (as run 59 ran them),
# then llama_train and effnet_infer step time in turns (native, vram; 3 rounds)
O=/tmp/o; mkdir -p $O
OUT=/tmp/ob bash bench/run_gpu.sh build-only > /dev/null 2>&1; tar -xzOf /tmp/ob/gpu-out.tgz ./build.log | tail -1
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
PYTHONUNBUFFERED=1 timeout 300 taskset -c 2-5 python3 bench/torch_workloads.py --alloc vram --steps 8 --workloads vit_train,llama_train,t5_varlen_train,effnet_infer --trace $O/extra_h200.trace --out $O/full_vram.json > $O/full_vram.log 2>&1
echo "full rc=$?"; grep -o '"workload": "[a-z0-9_]*"\|"reserved_over_requested": [0-9.]*' $O/full_vram.log | paste - -; gzip -9 $O/extra_h200.trace
for w in llama_train effnet_infer; do
  mkdir -p $O/ab_$w
  for r in 1 2 3; do
    for k in native vram; do
      PYTHONUNBUFFERED=1 timeout 200 taskset -c 2-5 python3 bench/torch_workloads.py --alloc $k --steps 12 --workloads $w --out $O/ab_$w/ab_r${r}_$k.json > $O/ab_$w/ab_r${r}_$k.log 2>&1
      echo "ab $w $r $k rc=$?"
    done
  done
  python3 bench/ab_rounds.py --workload $w $O/ab_$w/ab_r*.json > $O/ab_$w.md 2>&1; tail -3 $O/ab_$w.md
done
tar -czf $OUT/run61.tgz -C $O .

# run 59: the four workloads of bench/extra_workloads.py under native, vram, expandable, native2;
# their traces re-recorded under PyTorch's allocator (t5's was cut short in run 9)
O=/tmp/o; mkdir -p $O
export PYTHONPATH=$PWD/python
for w in vit_train llama_train t5_varlen_train effnet_infer; do
  timeout 120 python3 -m vram_torch record -o "$O/$w.trace" bench/extra_workloads.py "$w" 3 > "$O/rec_$w.log" 2>&1
  echo "record $w rc=$? $(grep -c '^a ' "$O/$w.trace" 2>/dev/null) allocations"; tail -1 "$O/rec_$w.log"
  gzip -9 "$O/$w.trace"
done
OUT=$O WL_TIMEOUT=400 WORKLOADS=vit_train,llama_train,t5_varlen_train,effnet_infer KINDS="native vram expandable native2" bash bench/run_gpu.sh workloads > $O/run.log 2>&1
tail -40 $O/run.log
tar -czf $OUT/run59.tgz -C $O .

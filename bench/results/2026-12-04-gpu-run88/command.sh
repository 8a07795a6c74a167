# run 88: ResNet-50 and GPT-2 training (12 steps) under this tree's vram_torch (new: a4a19cc, the lock
# biased at most once) and the build before the lock (old: .devcarry/base = git archive 25b9600), in
# turns, 3 rounds, one process each on cores 2-9 (machine.txt copied from run 87; a fresh machine
# session of the same kind).
(cmake -S . -B b -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build b -j16 --target vram_torch >/dev/null 2>&1) & (cmake -S .devcarry/base -B ob -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build ob -j16 --target vram_torch >/dev/null 2>&1) & wait; export PYTHONPATH=$PWD/python; S=$OUT/summary.txt; for r in 1 2 3; do for k in new old; do lib=$PWD/b/libvram_torch.so; [ $k = old ] && lib=$PWD/ob/libvram_torch.so; VRAM_TORCH_LIBRARY=$lib PYTHONUNBUFFERED=1 timeout 100 taskset -c 2-9 python3 bench/torch_workloads.py --alloc vram --workloads resnet50_train,gpt2_train --steps 12 > $OUT/log_${k}_$r.txt 2>&1; echo "round $r $k rc=$?" >> $S; grep '^{"workload"' $OUT/log_${k}_$r.txt | python3 -c "
import sys,json
for l in sys.stdin:
  d=json.loads(l); print('  %s %s step %.2f ms  res/req %.3f last loss %s' % (d['workload'], d['allocator'], d['step_time_s']*1e3, d['reserved_over_requested'], d['losses'][-1]))" >> $S; done; done; cat $S

# run 85: GPT-2 sampling and ResNet-50 training under this tree's vram_torch (new, e82b852), the
# previous build's (old: .devcarry/base = git archive 25b9600) and PyTorch native, in turns, 3 rounds,
# one process each (same machine session as runs 83-84; machine.txt copied from run 84).
# (log_old_3.txt did not come back: the device tool returns at most 8 files; its figures are in the
# call's printed summary, quoted in ../2026-12-04-biased-lock.md.)
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build b -j16 --target vram_torch >/dev/null 2>&1 || echo B FAILED; cmake -S .devcarry/base -B ob -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build ob -j16 --target vram_torch >/dev/null 2>&1 || echo OB FAILED; export PYTHONPATH=$PWD/python; S=$OUT/summary.txt; for r in 1 2 3; do for k in new old native; do lib=$PWD/b/libvram_torch.so; [ $k = old ] && lib=$PWD/ob/libvram_torch.so; a=vram; [ $k = native ] && a=native; VRAM_TORCH_LIBRARY=$lib PYTHONUNBUFFERED=1 timeout 150 python3 bench/torch_workloads.py --alloc $a --workloads gpt2_generate,resnet50_train --steps 8 > $OUT/log_${k}_$r.txt 2>&1; echo "round $r $k rc=$?" >> $S; grep '^{"workload"' $OUT/log_${k}_$r.txt | python3 -c "
import sys,json
for l in sys.stdin:
  d=json.loads(l); print('  %s %s step %.1f ms  res/req %.3f losses %s' % (d['workload'], d['allocator'], d['step_time_s']*1e3, d['reserved_over_requested'], d['losses'][-1]))" >> $S; done; done; cat $S

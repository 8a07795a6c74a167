# run 92: the `gpu` label and every CPU test on this tree (with test_torch_streams.py registered),
# then tests/gpu/test_torch_streams.py five more times in turns against this tree's
# libvram_torch.so (new) and the allocator before the busy-edge fix (old, .devcarry/oldfix as in
# run 91). The device tool returned 8 files: old_6..8.log are not here; their failure counts were
# printed by the command (summary.txt).
OUT=$OUT bash bench/run_gpu.sh tests
for i in 4 5 6 7 8; do
  timeout 200 python3 tests/gpu/test_torch_streams.py $PWD/b/libvram_torch.so > $OUT/new_$i.log 2>&1; echo "new $i rc=$? fails=$(grep -c FAIL $OUT/new_$i.log)"
  timeout 200 python3 tests/gpu/test_torch_streams.py $PWD/.devcarry/oldfix/bo/libvram_torch.so > $OUT/old_$i.log 2>&1; echo "old $i rc=$? fails=$(grep -c FAIL $OUT/old_$i.log)"
done

# run 93: tests/gpu/test_torch_streams.py with vram's default configuration (VRAM_ALLOC_CONF empty:
# 64 MiB chunks, 3% reserve slack) against this tree (new) and the allocator before the busy-edge
# fix (old, .devcarry/oldfix as in run 91), in turns, 4 rounds (machine.txt: the same machine kind
# as run 92, a fresh session). Result: with the defaults this workload moves no memory (110-121
# maps, 0 unmaps per run), so both builds keep every tensor; the one failing check in every run is
# the test's own "memory moved under the streams", as it should be here.
for i in 1 2 3 4; do for k in new old; do
  lib=$PWD/b/libvram_torch.so; [ $k = old ] && lib=$PWD/.devcarry/oldfix/bo/libvram_torch.so
  VRAM_ALLOC_CONF= timeout 200 python3 tests/gpu/test_torch_streams.py $lib > $OUT/default_${k}_$i.log 2>&1
done; done

# run 91: tests/gpu/test_torch_streams.py (three streams, memory moving under them) against this
# tree's libvram_torch.so (new) and the allocator before the busy-edge fix (old: .devcarry/oldfix,
# this tree with src/memory/pages.c and allocator.c from 31d99d9), in turns, 3 rounds. (Run 90b,
# not kept, found the first version of the test racing with itself: a late write on the owner
# stream while another stream still read the tensor; the owner now waits for those streams.)
(cmake -S . -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target vram_torch) & (cd .devcarry/oldfix && cmake -S . -B bo -DCMAKE_BUILD_TYPE=Release && cmake --build bo -j16 --target vram_torch) & wait
for i in 1 2 3; do
  timeout 200 python3 tests/gpu/test_torch_streams.py $PWD/b/libvram_torch.so > $OUT/new_$i.log 2>&1
  timeout 200 python3 tests/gpu/test_torch_streams.py $PWD/.devcarry/oldfix/bo/libvram_torch.so > $OUT/old_$i.log 2>&1
done

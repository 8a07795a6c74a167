# run 96 (2026-12-04, ~09:20 UTC, H200 as in gpu-run95/machine.txt): tests/gpu/test_torch_streams.py (three
# streams, late writes, values checked) under nine VRAM_ALLOC_CONF settings x three seeds, on the
# tree of 06c6e66 plus the --seed option. c7 (max_split_size_mb:8) is refused at enable() as
# PyTorch refuses it (at least 20 MB); run 97 (extra.txt) redid it with 24. The one check that
# failed in c2, c3 and c6 was the test's own "memory moved" expectation, which only its default
# configuration meets (0 unmaps there); the test now checks it only under that configuration.
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build b -j16 >/dev/null 2>&1 || { echo BUILD FAILED; exit 1; }
export VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so PYTHONPATH=$PWD/python
i=0
for conf in "chunk_size_mb:2,move_min_mb:2,reserve_slack:0" "" "expandable_segments:False" "garbage_collection_threshold:0.5,chunk_size_mb:2,move_min_mb:2,reserve_slack:0" "page_size_mb:4,chunk_size_mb:8,move_min_mb:4,reserve_slack:0" "chunk_size_mb:4,move_min_mb:4,reserve_slack:0,move_busy_pages:False" "expandable_segments:False,max_split_size_mb:8" "roundup_power2_divisions:4,chunk_size_mb:2,move_min_mb:2,reserve_slack:0" "caching:False"; do
  i=$((i+1))
  for seed in 1 2 3; do
    VRAM_ALLOC_CONF="$conf" timeout 150 python3 tests/gpu/test_torch_streams.py b/libvram_torch.so --seed $seed > $OUT/streams_c${i}_s$seed.log 2>&1
    echo "c$i [$conf] seed $seed rc=$? $(grep -E 'passed|FAIL' $OUT/streams_c${i}_s$seed.log | tail -1)"
  done
done | tee $OUT/hunt.txt

# run 133 (2026-12-04 18:36 UTC): GPT-2 sampling's step time, PyTorch native and vram in turns, six
# rounds of one process each (6 calls of 384 tokens for 16 sequences, the first dropped), pinned
# cores 2-5, on f94b3eb, the H200 of machine.txt (ab.md). The host was noisy that hour (one call
# 2.2-4.3 s in either allocator): vram vs native -0.1% by the median over rounds of each process's
# median call, -12.1% by fastest calls, rounds -21.4% ... +37.0%. The sampled tokens' checksums are
# the same in every process; reserved / requested at the peak 1.082 under vram, 1.893 under native.
export OUT=$OUT; ROUNDS=6 STEPS=18 bash bench/run_gpu.sh ab

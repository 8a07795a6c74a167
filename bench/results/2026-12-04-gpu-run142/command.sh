# run 142 (2026-12-04 20:14 UTC), the H200 of machine.txt: every CPU test and the gpu label on
# c12aea9 (the previous session's final tree). gpu label: cuda_alloc 295, cuda_device 60, the
# PyTorch plug-in test 93 (first run of the rewritten caching check, the settings merge where the
# last value wins, starting_config), streams 6,002; the two-GPU test skipped (one GPU lent). 2m34s.
export OUT=$OUT; bash bench/run_gpu.sh tests

# run 110 (2026-12-04 ~14:37 UTC): every CPU test and the gpu label on the session's final tree
# (after the fuzz_alloc decoding fix), the H200 of machine.txt
export OUT=$OUT; bash bench/run_gpu.sh tests

# run 104 (2026-12-04 13:32 UTC): every CPU test and the gpu label on the tree of e7d3f71 plus the
# afternoon's changes (empty trace requests, the snapshot's graph_pool, the fuzzer's pool shadow),
# the first GPU run of e7d3f71 (the stream_wait refactor); machine.txt has the H200 and driver
export OUT=$OUT; bash bench/run_gpu.sh tests

# run 132 (2026-12-04 18:33 UTC): every CPU test and the gpu label on f94b3eb (main at the start of
# the late-evening session: the previous session's review changes after run 131 -- vram_allocator_room
# behind cacheInfo, optional context scopes, the exports map, the PyErr fallback -- tested on the
# CPU only until now), the H200 of machine.txt. gpu label: 295 + 60 checks, the PyTorch plug-in
# test 81 (cudnn.benchmark, C++ record_stream, stacks, OOM observer, profiler), the streams test
# 6,002; the two-GPU test skipped (one GPU lent). 2m32s.
export OUT=$OUT; bash bench/run_gpu.sh tests

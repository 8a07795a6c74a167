# run 100 (2026-12-04 09:45 UTC): the four workloads of issue 3 on the final tree (0e0d85b + docs),
# native then vram, one process each, 8 steps (3 generate calls)
KINDS="native vram" STEPS=8 bash bench/run_gpu.sh workloads

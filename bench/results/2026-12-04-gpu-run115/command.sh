# run 115 (2026-12-04 ~15:40 UTC): every CPU test and the gpu label on a6c8c7b (the checkpoint
# restores), the H200 of machine.txt. gpu label: 295 + 60 checks, the PyTorch plug-in test 70
# (its reduce-overhead part now runs bench/graph_trees_workout.py under vram: six phases matched,
# 6 restores, 13 recreated, 10 adopted, 0 left), the streams test 6,002; the two-GPU test skipped.
# (Runs 112-113, earlier this session, tried the workout before its final form; run 114 is the
# measurement of 2026-12-04-graph-tree-restores.md.)
export OUT=$OUT; bash bench/run_gpu.sh tests

# run 120 (2026-12-04 ~17:10 UTC): every CPU test, the gpu label and the latency rounds on 605d575
# (main at the start of the evening session: last session's final review changes, which had been
# tested on the CPU only), the H200 of machine.txt. gpu label: 295 + 60 checks, the PyTorch
# plug-in test 70, the streams test 6,002; the two-GPU test skipped (one GPU lent). Latency,
# three rounds in turns on one pinned core: pairs 0.052-0.073 of native, the random workload
# 0.304 cold and 0.168 warm (latency_rounds.md). (Run 119, the same command a minute earlier,
# lost its files: a tar of the wrong folder overwrote the script's own.)
export OUT=$OUT; ROUNDS=3 bash bench/run_gpu.sh tests latrounds

# run 146 (2026-12-04 20:52 UTC): the latency benchmark, this tree (0d9df88, "vram"), run 120's tree
# (605d575, "base": git archive into .devcarry/base, carried) and PyTorch native in turns on one
# pinned core, 3 rounds. Median ratios to native in latency_rounds.md.
export OUT=$OUT; BASE=.devcarry/base ROUNDS=3 bash bench/run_gpu.sh latrounds

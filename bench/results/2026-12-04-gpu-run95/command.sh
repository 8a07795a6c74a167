# run 95 (2026-12-04, 09:14 UTC): the gpu label and the latency benchmark in turns after the
# free-insertion change (3b56723): this tree ("vram"), the tree before it ("base", 
# `git archive b9413bf` into .devcarry/base) and PyTorch native, 5 rounds on one pinned core.
BASE=$PWD/.devcarry/base ROUNDS=5 bash bench/run_gpu.sh tests latrounds

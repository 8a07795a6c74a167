OUT=$OUT BASE=.devcarry/base ROUNDS=3 PIN=3 bash bench/run_gpu.sh tests latrounds   # tree: 25b9600 + the biased lock (uncommitted); BASE = git archive 25b9600

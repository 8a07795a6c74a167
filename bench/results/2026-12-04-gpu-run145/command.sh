# run 145 (2026-12-04 20:49 UTC): the latency benchmark, vram (0d9df88) and PyTorch native in
# turns on one pinned core, three rounds, right after run 144 on the same machine. vram's pairs
# came out at 23-40 ns (24 in earlier runs) and random warm at 121 ns (85): run 146 and 147 then
# compared the tree with run 120's (605d575) in turns, and found no difference beyond the host's
# spread (this run caught a slow stretch of the host for vram in rounds 1 and 3).
export OUT=$OUT; ROUNDS=3 bash bench/run_gpu.sh latrounds

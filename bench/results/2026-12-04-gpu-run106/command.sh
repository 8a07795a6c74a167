# run 106 (2026-12-04 ~14:00 UTC): the latency benchmark (docs/benchmarks.md section 2) on the tree of
# eea84c3 (the allocator as in e7d3f71: stream_list_renew removed, stream_wait), vram and PyTorch
# native in turns, five rounds, one pinned core (bench/latency_rounds.py); the host was noisy in
# rounds 1-2 (native's 64 KiB pair at 827 ns against 448-480 in rounds 4-5)
export OUT=$OUT; ROUNDS=5 bash bench/run_gpu.sh latrounds

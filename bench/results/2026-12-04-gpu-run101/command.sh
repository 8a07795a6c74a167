# run 101 (2026-12-04 09:46 UTC): BERT alone, 4 steps, under native twice and vram twice ("vram:caching:True"
# is vram with a default option restated: a second vram process), then GPT-2 sampling with the
# allocators in turns (2 rounds; each process makes 3 calls, the first dropped)
KINDS="native native2 vram vram:caching:True" STEPS=4 WORKLOADS=bert_varlen bash bench/run_gpu.sh workloads
ROUNDS=2 STEPS=6 bash bench/run_gpu.sh ab

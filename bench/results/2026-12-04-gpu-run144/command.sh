# run 144 (2026-12-04 20:45 UTC), the H200 of machine.txt: the four workloads of issue 3 on 0d9df88
# (this session's final allocator: vram_allocator_set_config, the previous session's caching switch
# and class_sized guard), one process each in the order native, vram, expandable, native#2, 8 steps.
# Memory and losses as in run 105 (ResNet-50 1.015, GPT-2 training 1.013, BERT 1.003, GPT-2
# sampling after the training programs 1.113; losses within native's own spread); step time
# within native's spread except GPT-2 sampling, +13.2% here (its per-process spread on this host:
# expandable -12.2%, native#2 -1.0%; run 133's six alternating rounds put vram at -0.1%).
export OUT=$OUT; KINDS="native vram expandable native#2" STEPS=8 bash bench/run_gpu.sh workloads

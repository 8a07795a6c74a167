# run 102 (2026-12-04 09:51 UTC): BERT alone, 8 steps, native twice and vram: are its losses
# bit-identical outside the four-workload process of run 100 (where one step differed by 9.5e-7)?
KINDS="native native2 vram" STEPS=8 WORKLOADS=bert_varlen bash bench/run_gpu.sh workloads

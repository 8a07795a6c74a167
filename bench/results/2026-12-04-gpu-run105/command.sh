# run 105 (2026-12-04 13:34 UTC): the four workloads of issue 3, native and vram twice each, one
# process per run in the order native, vram, native#2, vram#2 (is BERT's one-ulp loss difference
# of run 100 inside native's own run-to-run spread in that process? yes: native#2 differs from
# native by the same 9.54e-07), same tree as run 104
export OUT=$OUT; KINDS="native vram native#2 vram#2" STEPS=8 bash bench/run_gpu.sh workloads

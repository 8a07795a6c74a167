# device call at 18:59 UTC (H100), main at the commit making cuDNN attention the default; gpu_call.sh:
#   build; gpu_test_gpu_cudnn; bench_flash --rounds 20;
#   two rounds: vram train --device cuda:0 --model gpt2 --data b/data/kjv.txt --batch 8 --steps 30 --lr 3e-4 --precision bf16
#     --lowp-weights keep with VRAM_ATTENTION=auto (round 1 and 2) and flash (round 1); gpt2_torch.py speed --precision bf16
#     --models same-compile[,hf-compile in round 1] --steps 25;
#   OUT=dir RECORD=0 ROUNDS=1 ALLOCS="native vram vram+plan+auto" WORKLOADS=infer_resnet50,infer_convnext bench/run_placement_gpu.sh;
#   gpu_test_gpu_ops 1
OUT=$OUT timeout 505 bash gpu_call.sh
# then on the same warm machine (19:05 UTC), recompute_variants.txt:
T="--device cuda:0 --model gpt2 --data b/data/kjv.txt --batch 8 --steps 30 --lr 3e-4 --precision bf16 --lowp-weights keep"
for rc in none gelu "gelu,layernorm"; do b/vram train $T --recompute $rc; done; b/vram train $T --checkpoint

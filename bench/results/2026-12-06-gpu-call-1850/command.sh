# device call at 18:50 UTC (H100), main at 7cbe3e3 plus the kept-weights test change (gpu_call.sh at that commit's tree):
OUT=$OUT timeout 585 bash gpu_call.sh
# gpu_call.sh: OUT=$OUT/c ROUNDS=1 bench/run_cudnn_gpu.sh; gpu_test_gpu_ops 1; gpu_test_gpu_flash;
# OUT=dir RECORD=0 ROUNDS=1 ALLOCS="native vram+plan+auto" WORKLOADS=gen_llama,gen_gpt2,ckpt_gpt2,ckpt_llama,infer_resnet50,infer_convnext bench/run_placement_gpu.sh

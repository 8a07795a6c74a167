# device call at 18:27 UTC (H100), main at 57b309d plus the hf-compile change to gpt2_torch.py / run_pending_gpu.sh
OUT=$OUT ROUNDS=2 STAGES="tests speed losses" timeout 585 bench/run_pending_gpu.sh
# then, on the same warm machine (18:31 UTC):
OUT=$OUT STAGES="place" timeout 520 bench/run_pending_gpu.sh

# run 62: the page budget counted from the last empty_cache: the four extra workloads in one
# process and the four bundled ones in one process, under vram (as runs 59/61 and 56 ran them)
O=/tmp/o; mkdir -p $O
OUT=/tmp/ob bash bench/run_gpu.sh build-only > /dev/null 2>&1; tar -xzOf /tmp/ob/gpu-out.tgz ./build.log | tail -1
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
PYTHONUNBUFFERED=1 timeout 300 taskset -c 2-5 python3 bench/torch_workloads.py --alloc vram --steps 8 --workloads vit_train,llama_train,t5_varlen_train,effnet_infer --out $O/extra_vram.json > $O/extra_vram.log 2>&1
echo "extra rc=$?"; grep -o '"workload": "[a-z0-9_]*"\|"reserved_over_requested": [0-9.]*' $O/extra_vram.log | paste - -
PYTHONUNBUFFERED=1 timeout 300 taskset -c 2-5 python3 bench/torch_workloads.py --alloc vram --steps 8 --out $O/wl_vram.json > $O/wl_vram.log 2>&1
echo "four rc=$?"; grep -o '"workload": "[a-z0-9_]*"\|"reserved_over_requested": [0-9.]*' $O/wl_vram.log | paste - -
python3 bench/torch_workloads.py --report $O/extra_vram.json > $O/extra.md; python3 bench/torch_workloads.py --report $O/wl_vram.json > $O/four.md
grep "device calls per step" $O/extra.md $O/four.md
tar -czf $OUT/run62.tgz -C $O .

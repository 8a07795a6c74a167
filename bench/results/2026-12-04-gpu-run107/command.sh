# run 107 (2026-12-04 ~14:20 UTC): every CPU test and the gpu label on the tree with
# vram_torch/graph_trees.py (torch.compile mode="reduce-overhead"), then the probe of what CUDA
# graph trees ask of the allocator, under PyTorch native and under vram
export OUT=$OUT; bash bench/run_gpu.sh tests
export PYTHONPATH=$PWD/python VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
for k in native vram; do echo "## $k"; python3 bench/graph_trees_probe.py $k 2>&1 | grep -v "^  File\|^    "; done > $OUT/graph_trees_probe.txt

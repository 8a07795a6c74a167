OUT=$OUT bash bench/run_gpu.sh tests   # tree d0da098 + the four-thread check in tests/gpu/test_torch_plugin.py

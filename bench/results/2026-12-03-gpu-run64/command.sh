OUT=$OUT bash bench/run_gpu.sh tests   # the final build of the session: CPU tests and the gpu label on the H200

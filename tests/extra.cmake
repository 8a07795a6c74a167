# Extra CTest entries and test helpers. Each helper keeps its entries in its own commented block.

# ---- smi (issue 4): the fake NVML libraries that tests/test_smi.c loads through
# VRAM_NVML_LIBRARY, and the `vram` binary the test runs. libfake_nvml is a current driver,
# libfake_nvml_old a pre-R510 one (no _v2 memory, no _v2/_v3 process lists).
add_library(fake_nvml SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fakes/fake_nvml.c)
add_library(fake_nvml_old SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fakes/fake_nvml.c)
target_compile_definitions(fake_nvml_old PRIVATE FAKE_NVML_OLD=1)
foreach(fake fake_nvml fake_nvml_old)
  set_target_properties(${fake} PROPERTIES C_VISIBILITY_PRESET hidden
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakes)
endforeach()
if(TARGET test_smi)
  add_dependencies(test_smi fake_nvml fake_nvml_old vram)
  target_compile_definitions(test_smi PRIVATE
    FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>"
    FAKE_NVML_OLD_PATH="$<TARGET_FILE:fake_nvml_old>"
    VRAM_EXE="$<TARGET_FILE:vram>")
  set_tests_properties(test_smi PROPERTIES TIMEOUT 120)
endif()
# With no driver: the clear line on stderr (test_smi also checks it is one line and exit status 2).
add_test(NAME smi_no_driver COMMAND vram smi)
set_tests_properties(smi_no_driver PROPERTIES
  ENVIRONMENT "VRAM_NVML_LIBRARY=${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/libnvidia-ml.so.1"
  PASS_REGULAR_EXPRESSION "vram smi: cannot load NVML: tried VRAM_NVML_LIBRARY=.*no-such-dir.*cannot open shared object file")
# ---- end smi

# ---- runtime (issue 5): the training corpus and `vram train` command-line checks ----
# The corpus ships gzip-compressed (data/kjv.txt.gz, see data/README.md); it is decompressed
# into the build tree at configure time for `vram train`, its tests and `make run`.
find_program(VRAM_GZIP gzip REQUIRED)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/data)
if(NOT EXISTS ${CMAKE_BINARY_DIR}/data/kjv.txt OR ${CMAKE_SOURCE_DIR}/data/kjv.txt.gz IS_NEWER_THAN ${CMAKE_BINARY_DIR}/data/kjv.txt)
  execute_process(COMMAND ${VRAM_GZIP} -dc ${CMAKE_SOURCE_DIR}/data/kjv.txt.gz
                  OUTPUT_FILE ${CMAKE_BINARY_DIR}/data/kjv.txt RESULT_VARIABLE vram_gunzip_rc)
  if(NOT vram_gunzip_rc EQUAL 0)
    message(FATAL_ERROR "could not decompress data/kjv.txt.gz")
  endif()
endif()
# vram_cli_test(NAME STATUS REGEX COMMAND [FAIL_REGEX]): runs the shell COMMAND (which sends
# stderr where it wants it) and passes when the output matches REGEX and the exit status is
# STATUS. CTest ignores a command's own status once PASS_REGULAR_EXPRESSION is set, so the
# status is checked in the shell, and any other one (a crash included) prints a line that
# FAIL_REGULAR_EXPRESSION catches.
function(vram_cli_test name status regex command)
  add_test(NAME ${name} COMMAND sh -c "${command}; s=$?; [ $s -eq ${status} ] || echo \"cli test: exit status $s, not ${status}\"")
  set(fail "cli test: exit status")
  if(ARGC GREATER 4)
    list(APPEND fail "${ARGV4}")
  endif()
  set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}" FAIL_REGULAR_EXPRESSION "${fail}")
endfunction()
# `vram train` from the command line: exit statuses and messages.
set(VRAM_TRAIN_CORPUS ${CMAKE_BINARY_DIR}/data/kjv.txt)
set(VRAM_EXE $<TARGET_FILE:vram>)
vram_cli_test(cli_train_unknown_flag 2 "unknown option '--bogus'" "${VRAM_EXE} train --bogus 2>&1")
vram_cli_test(cli_train_missing_corpus 2 "cannot use corpus.*/nonexistent/corpus.txt"
              "${VRAM_EXE} train --data /nonexistent/corpus.txt 2>&1")
# no --data, run where neither the build's corpus nor an installed one (../share/vram/ beside the
# executable) exists: one message naming both places
vram_cli_test(cli_train_no_default_corpus 2 "no corpus: neither build/data/kjv.txt .* nor an installed .*/share/vram/kjv.txt; pass --data PATH"
              "cd / && ${VRAM_EXE} train --steps 1 2>&1")
vram_cli_test(cli_train_bad_value 2 "unknown optimizer 'lion'"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --optimizer lion 2>&1")
# mixed precision's flags (issue 38): bad values, and 16-bit on the CPU, refused before training
vram_cli_test(cli_train_bad_precision 2 "--precision: 'fp8' is not fp32, bf16 or fp16"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --precision fp8 2>&1")
vram_cli_test(cli_train_bad_loss_scale 2 "--loss-scale: 'static' is not dynamic or off"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --loss-scale static 2>&1")
vram_cli_test(cli_train_bad_recompute 2 "--recompute: 'attention' is not gelu,layernorm, gelu, layernorm, none or block"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --recompute attention 2>&1")
vram_cli_test(cli_train_bad_lowp_weights 2 "--lowp-weights: 'fp8' is not cast or keep"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --lowp-weights fp8 2>&1")
vram_cli_test(cli_train_lowp_weights_fp32 2 "--lowp-weights keep keeps 16-bit weight copies for mixed precision"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --lowp-weights keep --steps 1 2>&1")
# the GELU: erf's for the tiny model, GPT-2's tanh for the gpt2 models, --activation (given before --model
# too) over it; a tanh model file resumes with the tanh GELU and is refused with erf's
vram_cli_test(cli_train_bad_activation 2 "--activation: 'relu' is not gelu_tanh or gelu_erf"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --activation relu 2>&1")
vram_cli_test(cli_train_activation_defaults 0 "vocab 256, erf GELU:.*tied embedding, tanh GELU:.*tied embedding, erf GELU:"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --layers 1 --width 32 --context 8 --batch 1 --steps 1 2>&1 && \
               ${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --model gpt2 --layers 1 --width 64 --heads 2 --context 8 --batch 1 --steps 1 2>&1 && \
               ${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --activation gelu_erf --model gpt2 --layers 1 --width 64 --heads 2 --context 8 --batch 1 --steps 1 2>&1")
vram_cli_test(cli_train_tanh_resume 0 "resumed .* at step 2.*tanh GELU.*summary.*uses the tanh GELU; this run's model the erf GELU \\(vram train: --activation gelu_tanh\\).*refused: 2"
              "d=$(mktemp -d) && ${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --activation gelu_tanh --layers 1 --width 32 --context 8 --batch 2 --steps 2 --save $d/m.vram >/dev/null && \
               ${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --activation gelu_tanh --layers 1 --width 32 --context 8 --batch 2 --steps 3 --resume $d/m.vram 2>&1 && \
               { ${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --layers 1 --width 32 --context 8 --batch 2 --steps 3 --resume $d/m.vram 2>&1; echo refused: $?; }; rm -rf $d")
vram_cli_test(cli_plan_lowp_weights_fp32 2 "--lowp-weights keep keeps 16-bit weight copies for mixed precision"
              "${VRAM_EXE} plan --device cuda --lowp-weights keep 2>&1")
vram_cli_test(cli_plan_bad_lowp_weights 2 "--lowp-weights: 'x' is not cast or keep" "${VRAM_EXE} plan --lowp-weights x 2>&1")
if(Python3_Interpreter_FOUND) # kept 16-bit weight copies, planned: what they add and what they save
  add_test(NAME plan_lowp_weights COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/plan_lowp_check.py $<TARGET_FILE:vram>)
endif()
# --residual (the residual stream f32 or 16-bit under mixed precision): bad values, lowp without
# mixed precision, and what fp32 adds to the plan (exactly the stream's saved tensors, widened)
vram_cli_test(cli_train_bad_residual 2 "--residual: 'bf16' is not fp32 or lowp"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --residual bf16 2>&1")
vram_cli_test(cli_train_residual_lowp_fp32 2 "--residual lowp is for mixed precision: add --precision bf16 or fp16"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --residual lowp --steps 1 2>&1")
vram_cli_test(cli_plan_bad_residual 2 "--residual: 'x' is not fp32 or lowp" "${VRAM_EXE} plan --residual x 2>&1")
vram_cli_test(cli_plan_residual_lowp_fp32 2 "--residual lowp is for mixed precision"
              "${VRAM_EXE} plan --device cuda --residual lowp 2>&1")
if(Python3_Interpreter_FOUND)
  add_test(NAME plan_residual_f32 COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/plan_residual_check.py $<TARGET_FILE:vram>)
endif()
vram_cli_test(cli_train_bf16_on_cpu 2 "--precision bf16 needs --device cuda: the CPU has no low-precision kernels"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --precision bf16 --steps 1 2>&1")
vram_cli_test(cli_plan_bad_recompute 2 "--recompute: 'x' is not gelu,layernorm"
              "${VRAM_EXE} plan --recompute x 2>&1")
vram_cli_test(cli_plan_bad_activation 2 "--activation: 'swish' is not gelu_tanh or gelu_erf"
              "${VRAM_EXE} plan --activation swish 2>&1")
vram_cli_test(cli_train_out_of_memory 1 "out of memory while training step 1"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --capacity 16MiB --batch 256 --steps 1 2>&1")
# (a 10^9-layer model was a 152 GB host calloc)
vram_cli_test(cli_train_shape_bound 2 "--layers needs an integer in \\[1, 4096\\]"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --layers 1000000000 2>&1")
# no steps trained nothing and reported a final train loss of nan
vram_cli_test(cli_train_zero_steps 2 "--steps needs an integer in \\[1, 1000000000\\], not '0'"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --steps 0 2>&1" "final train loss")
vram_cli_test(cli_train_zero_capacity 2 "--capacity: '0.3' is zero bytes"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --capacity 0.3 2>&1")
# a --capacity the host cannot reserve is the flag's fault, not the training's (it advised a larger one)
vram_cli_test(cli_train_huge_capacity 2 "--capacity: .*give a smaller --capacity"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --capacity 200TiB 2>&1" "larger --capacity")
# tokens per step are --batch x --accum x --context, which can pass 2^63 (it overflowed a long long)
vram_cli_test(cli_train_tokens_per_step 1 "= 64000000000000000000 tokens/step"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --batch 1000000000 --accum 1000000000 --steps 1 --layers 1 --heads 1 --width 8 --capacity 64MiB 2>&1"
              "runtime error")
vram_cli_test(cli_train_bad_conf 2 "unknown key 'bogus'"
              "VRAM_ALLOC_CONF=bogus:1 ${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --steps 1 2>&1")
# output that cannot be written is an error, not a lost report
vram_cli_test(cli_output_write_error 1 "vram version: writing the output failed" "${VRAM_EXE} version 2>&1 >&-")
vram_cli_test(cli_help_write_error 1 "vram --help: writing the output failed" "${VRAM_EXE} --help 2>&1 >/dev/full")
# replay flushes each report itself: its failure is said with the reason (it said "write error")
vram_cli_test(cli_replay_write_error 1 "^vram replay: writing the output failed: No space left on device\n$"
              "printf '# memtrace v1\\na 1 10 0\\nf 1\\n' | ${VRAM_EXE} replay - 2>&1 >/dev/full" "write error")
vram_cli_test(cli_version_extra_argument 2 "vram version: takes no arguments, not '--bogus'"
              "${VRAM_EXE} version --bogus 2>&1")
# endless input that is no trace stops at its first line, not after filling memory
vram_cli_test(cli_replay_endless_input 2 "/dev/zero line 1: bad header .*the first line must be '# memtrace v1'"
              "${VRAM_EXE} replay /dev/zero 2>&1")
set_tests_properties(cli_replay_endless_input PROPERTIES TIMEOUT 20)
add_test(NAME cli_train_report
         COMMAND $<TARGET_FILE:vram> train --data ${VRAM_TRAIN_CORPUS} --steps 3 --layers 1 --heads 2 --width 32
                 --context 16 --batch 4 --accum 2 --checkpoint --eval-every 2 --eval-batches 2 --report)
set_tests_properties(cli_train_report PROPERTIES PASS_REGULAR_EXPRESSION "categories add up to the allocator's allocated bytes: yes")
# ---- the runtime on the GPU (issue 37) ----
# Without a driver (CI, the build machine) asking for the GPU is one clear message and status 1;
# a device that is no device is bad usage; an unknown model says which exist.
vram_cli_test(cli_train_no_gpu 1 "vram train: --device: no CUDA driver|vram train: setting up the GPU runtime failed"
              "VRAM_LIBCUDA=/nonexistent/libcuda.so.1 ${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --device cuda:0 --model gpt2 --steps 1 2>&1")
vram_cli_test(cli_train_bad_device 2 "--device: 'tpu:0' is not cpu or cuda\\[:N\\]"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --device tpu:0 2>&1")
vram_cli_test(cli_train_bad_model 2 "unknown model 'gpt5' \\(tiny, gpt2, gpt2-medium, gpt2-large, gpt2-xl\\)"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --model gpt5 2>&1")
vram_cli_test(cli_train_small_vocab 2 "--vocab needs an integer in \\[256, 16777216\\]"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --vocab 100 2>&1")
# With a driver but no kernels in the build (the sanitizer builds leave nvcc out) the runtime
# says so; with kernels, the fake driver (no module loading) is refused just as clearly.
if(VRAM_NVCC AND VRAM_CUDA_INCLUDE_DIR)
  set(VRAM_GPU_RUNTIME_MISSING "the CUDA driver '.*' lacks cu[A-Za-z]+ \\(too old\\?\\)")
else()
  set(VRAM_GPU_RUNTIME_MISSING "no GPU kernels: vram was built without (nvcc|the CUDA toolkit's headers)")
endif()
vram_cli_test(cli_train_gpu_runtime_missing 1 "setting up the GPU runtime failed: .*${VRAM_GPU_RUNTIME_MISSING}"
              "VRAM_LIBCUDA=$<TARGET_FILE:fake_cuda> ${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --device cuda:0 --steps 1 2>&1")
# the memory mechanisms of test_runtime_memory, asserted again on the GPU
add_test(NAME gpu_test_runtime_memory COMMAND test_runtime_memory cuda)
set_tests_properties(gpu_test_runtime_memory PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu)
# on the GPU: a short GPT-2-shaped run whose categories add up, a checkpoint saved and resumed
# there (the tensors go through the host), and a capacity too small for
# GPT-2 124M as a clean out-of-memory report with what to change (status 1); skipped without a GPU
add_test(NAME gpu_cli_train COMMAND sh -c "\
  if ! ${VRAM_EXE} smi --list >/dev/null 2>&1 && ! [ -e /dev/nvidiactl ]; then echo 'SKIP: no GPU'; exit 77; fi; \
  ${VRAM_EXE} train --device cuda:0 --data ${VRAM_TRAIN_CORPUS} --model gpt2 --layers 2 --context 128 --batch 4 --steps 3 --eval-every 3 --eval-batches 2 --checkpoint --report || exit 1; \
  ck=${CMAKE_CURRENT_BINARY_DIR}/gpu_cli_train.vram; \
  ${VRAM_EXE} train --device cuda:0 --data ${VRAM_TRAIN_CORPUS} --model gpt2 --layers 2 --context 128 --batch 4 --steps 2 --save $ck >/dev/null || exit 1; \
  ${VRAM_EXE} train --device cuda:0 --data ${VRAM_TRAIN_CORPUS} --model gpt2 --layers 2 --context 128 --batch 4 --steps 3 --resume $ck >/dev/null || { echo 'resume on the GPU failed'; exit 1; }; \
  out=$(${VRAM_EXE} train --device cuda:0 --data ${VRAM_TRAIN_CORPUS} --model gpt2 --batch 8 --steps 1 --capacity 1GiB 2>&1); s=$?; \
  echo \"$out\" | tail -5; [ $s -eq 1 ] && echo \"$out\" | grep -q 'out of memory while' && echo \"$out\" | grep -q 'try a smaller --batch'")
set_tests_properties(gpu_cli_train PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu
                     PASS_REGULAR_EXPRESSION "categories add up to the allocator's allocated bytes: yes")
# vram generate --device cuda:0 against the CPU: the same greedy tokens and logits in every weight format
add_test(NAME gpu_cli_generate COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/gpu/test_gpu_generate.py
                                       ${VRAM_EXE} ${VRAM_TRAIN_CORPUS})
set_tests_properties(gpu_cli_generate PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu)
# Mixed precision on the GPU: the loss scaler's semantics with the device-side state, and
# `vram train --precision bf16 / fp16` end to end (fp16 with the dynamic loss scale)
add_test(NAME gpu_test_grad_scaler COMMAND test_grad_scaler cuda)
set_tests_properties(gpu_test_grad_scaler PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 300 RESOURCE_LOCK gpu)
add_test(NAME gpu_cli_train_mixed COMMAND sh -c "\
  if ! ${VRAM_EXE} smi --list >/dev/null 2>&1 && ! [ -e /dev/nvidiactl ]; then echo 'SKIP: no GPU'; exit 77; fi; \
  ${VRAM_EXE} train --device cuda:0 --data ${VRAM_TRAIN_CORPUS} --model gpt2 --layers 2 --context 256 --batch 4 --steps 20 --precision bf16 --report || exit 1; \
  ${VRAM_EXE} train --device cuda:0 --data ${VRAM_TRAIN_CORPUS} --model gpt2 --layers 2 --context 256 --batch 4 --steps 20 --precision fp16 --checkpoint --report | grep 'loss scaling: scale' || exit 1; \
  res=$(${VRAM_EXE} train --device cuda:0 --data ${VRAM_TRAIN_CORPUS} --model gpt2 --layers 2 --context 256 --batch 4 --steps 10 --precision bf16 --residual fp32) || exit 1; \
  echo \"$res\" | grep 'fp32 residual stream' || exit 1; \
  echo \"$res\" | grep -E '^attention: (cuDNN|vram)' || exit 1; \
  res=$(VRAM_ATTENTION=flash ${VRAM_EXE} train --device cuda:0 --data ${VRAM_TRAIN_CORPUS} --model gpt2 --layers 2 --context 256 --batch 4 --steps 2 --precision bf16) || exit 1; \
  echo \"$res\" | grep -E '^attention: vram.s flash kernels .*VRAM_ATTENTION=flash' || exit 1; \
  out=$(${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --steps 1 --precision bf16 2>&1); s=$?; echo \"$out\" | tail -2; \
  [ $s -ne 0 ] && echo \"$out\" | grep -q 'low-precision kernels'")
set_tests_properties(gpu_cli_train_mixed PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu
                     PASS_REGULAR_EXPRESSION "categories add up to the allocator's allocated bytes: yes")
# ---- end runtime ----

# ---- issue 3 (cuda branch): PyTorch plug-in tests ----------------------------------------
# The plug-in's Python side on a GPU with torch (label gpu; exits 77 = skipped without torch or
# a GPU; a missing library fails), and the trace converter of `python -m vram_torch record` (no torch).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME gpu_test_torch_plugin
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/gpu/test_torch_plugin.py
                   ${CMAKE_BINARY_DIR}/libvram_torch.so)
  set_tests_properties(gpu_test_torch_plugin PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu)
  # three streams with memory moving under them (page-sized chunks, no slack): no tensor overwritten
  add_test(NAME gpu_test_torch_streams
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/gpu/test_torch_streams.py
                   ${CMAKE_BINARY_DIR}/libvram_torch.so)
  set_tests_properties(gpu_test_torch_streams PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu)
  # memory by category, the leak finder and explain_oom (vram_torch.track) on a GPU
  add_test(NAME gpu_test_torch_categories
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/gpu/test_torch_categories.py
                   ${CMAKE_BINARY_DIR}/libvram_torch.so)
  set_tests_properties(gpu_test_torch_categories PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu)
  # the same on two GPUs: one allocator per device (skipped with fewer than two)
  add_test(NAME gpu_test_torch_multi_gpu
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/gpu/test_torch_multi_gpu.py
                   ${CMAKE_BINARY_DIR}/libvram_torch.so)
  set_tests_properties(gpu_test_torch_multi_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu)
  # the build installed (cmake/install.cmake) and the repository pip-installed, each used from
  # outside the repository: enable(), `python -m vram_torch run` and `record`, the installed
  # `vram replay --fit`
  add_test(NAME gpu_test_installed_torch
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/gpu/test_installed_torch.py ${CMAKE_BINARY_DIR}
                   ${VRAM_INSTALL_PYTHONDIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(gpu_test_installed_torch PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu)
  add_test(NAME test_vram_torch_record
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_vram_torch_record.py)
  # the launcher of `python -m vram_torch run/record`, without PyTorch
  add_test(NAME test_vram_torch_launch
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_vram_torch_launch.py)
  # torch.cuda's memory functions routed to vram_torch, on stand-in torch modules
  add_test(NAME test_torch_routes
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_torch_routes.py)
  # the model of PyTorch's expandable segments (bench/expandable_model.py) against PyTorch's peaks
  add_test(NAME test_expandable_model
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_expandable_model.py)
  # the interleaved-rounds step-time report of bench/run_gpu.sh's `ab` mode
  add_test(NAME test_ab_rounds
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_ab_rounds.py)
  # bench/torch_workloads.py's report and workload names, without a GPU
  add_test(NAME test_torch_workloads
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_torch_workloads.py)
  # bench/placement_workloads.py's report (issue 46's GPU programs), without a GPU
  add_test(NAME test_placement_workloads
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_placement_workloads.py)
  # the interleaved-rounds latency report of bench/run_gpu.sh's `latrounds` mode
  add_test(NAME test_latency_rounds
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_latency_rounds.py)
endif()
# A fake libcuda (tests/fakes/fake_cuda.c) for the CUDA device's CPU test.
add_library(fake_cuda SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fakes/fake_cuda.c)
set_target_properties(fake_cuda PROPERTIES C_VISIBILITY_PRESET hidden
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakes)
if(TARGET test_cuda_fake)
  add_dependencies(test_cuda_fake fake_cuda)
  target_compile_definitions(test_cuda_fake PRIVATE FAKE_CUDA_PATH="$<TARGET_FILE:fake_cuda>")
  if(NOT VRAM_CUDA_INCLUDE_DIR)
    # Without cuda.h the backend is the "built without CUDA headers" stub: nothing to test.
    set_tests_properties(test_cuda_fake PROPERTIES DISABLED TRUE)
  endif()
endif()
if(Python3_Interpreter_FOUND AND VRAM_CUDA_INCLUDE_DIR)
  # In the sanitizer build the plug-in is instrumented, and a python that is not loads it only with
  # the sanitizers' runtimes loaded first: where the compiler has them as shared libraries (gcc)
  # they are preloaded, so that the Python tests of the plug-in run under ASan and UBSan too
  # (leak detection off: Python keeps its own allocations at exit); elsewhere those tests skip.
  set(VRAM_PY_SANITIZED_ENV "")
  if(VRAM_SANITIZE)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE vram_asan_so
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libubsan.so OUTPUT_VARIABLE vram_ubsan_so
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${vram_asan_so}" AND EXISTS "${vram_asan_so}" AND IS_ABSOLUTE "${vram_ubsan_so}"
       AND EXISTS "${vram_ubsan_so}")
      set(VRAM_PY_SANITIZED_ENV "LD_PRELOAD=${vram_asan_so} ${vram_ubsan_so};ASAN_OPTIONS=detect_leaks=0;VRAM_TEST_PRELOADED=1")
    endif()
  endif()
  add_test(NAME test_torch_plugin_cpu
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_torch_plugin_cpu.py
                   $<TARGET_FILE:vram_torch> $<TARGET_FILE:fake_cuda>)
  set_tests_properties(test_torch_plugin_cpu PROPERTIES SKIP_RETURN_CODE 77)
  # PyTorch's allocator settings (PYTORCH_ALLOC_CONF, ...) applied by the plug-in, and their bad values
  add_test(NAME test_torch_conf
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_torch_conf.py
                   $<TARGET_FILE:vram_torch> $<TARGET_FILE:fake_cuda>)
  set_tests_properties(test_torch_conf PROPERTIES SKIP_RETURN_CODE 77)
  # the plug-in's hooks into PyTorch's C++ (its out-of-memory path and observer, the profiler's
  # memory reports through a stand-in libc10.so), from C++: an OOM throws a C++ exception
  add_library(fake_c10 SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fakes/fake_c10.cpp)
  set_target_properties(fake_c10 PROPERTIES OUTPUT_NAME c10 CXX_VISIBILITY_PRESET hidden
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakes/c10)
  add_library(fake_torch_cuda SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fakes/fake_torch_cuda.cpp)
  set_target_properties(fake_torch_cuda PROPERTIES OUTPUT_NAME torch_cuda CXX_VISIBILITY_PRESET hidden
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakes/c10)
  add_executable(torch_plugin_hooks ${CMAKE_CURRENT_SOURCE_DIR}/torch_plugin_hooks.cpp)
  target_link_libraries(torch_plugin_hooks PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(torch_plugin_hooks vram_torch fake_cuda fake_c10 fake_torch_cuda)
  add_test(NAME torch_plugin_hooks
           COMMAND torch_plugin_hooks $<TARGET_FILE:vram_torch> $<TARGET_FILE:fake_cuda>
                   $<TARGET_FILE_DIR:fake_c10>)
  # the vram_torch package over the same library and fake driver, with a stand-in torch
  add_test(NAME test_vram_torch_cpu
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_vram_torch_cpu.py
                   $<TARGET_FILE:vram_torch> $<TARGET_FILE:fake_cuda>)
  set_tests_properties(test_vram_torch_cpu PROPERTIES SKIP_RETURN_CODE 77)
  # memory by category and the leak finder (vram_torch.track) over the same, checked byte for byte
  add_test(NAME test_vram_torch_categories_cpu
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_vram_torch_categories_cpu.py
                   $<TARGET_FILE:vram_torch> $<TARGET_FILE:fake_cuda> $<TARGET_FILE:vram>)
  set_tests_properties(test_vram_torch_categories_cpu PROPERTIES SKIP_RETURN_CODE 77)
  # learned placement under the plug-in (VRAM_STEP_PLAN=1, src/torch/plan_route.cpp): an H100
  # recording replayed through it, record_stream on an arena block, two threads, bad values
  add_test(NAME test_torch_step_plan_cpu
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_torch_step_plan_cpu.py
                   $<TARGET_FILE:vram_torch> $<TARGET_FILE:fake_cuda> ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_torch_step_plan_cpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  if(VRAM_PY_SANITIZED_ENV)
    set_tests_properties(test_torch_plugin_cpu test_torch_conf test_vram_torch_cpu test_vram_torch_categories_cpu
                         test_torch_step_plan_cpu PROPERTIES ENVIRONMENT "${VRAM_PY_SANITIZED_ENV}")
  endif()
endif()
# ---- end issue 3 --------------------------------------------------------------------------

# ---- tools: vram replay / vram bench end to end, and the trace parser fuzz target ----------
# (maintained with src/trace and src/cli/{replay,bench}.c; keep other helpers' blocks apart)
find_package(Python3 COMPONENTS Interpreter QUIET)
# bench_pool_replay: a workload placed wholly in one private pool (reduce-overhead's warm-ups)
# stays within 5% of its peak requested memory on BERT's varying lengths and 10% on T5's (1.56
# and 1.92 before the pools' bins of 2026-12-04); no trace named is exit status 2 with the usage
add_test(NAME bench_pool_replay_bounds
         COMMAND sh -c "out=$($<TARGET_FILE:bench_pool_replay> ${CMAKE_SOURCE_DIR}/traces/bert_varlen_train.trace.gz ${CMAKE_SOURCE_DIR}/traces/recorded/t5_varlen_train_h200.trace.gz) || exit 1; echo \"$out\"; echo \"$out\" | awk -F'|' '$2 ~ /[.]trace/ { n++; bound = ($2 ~ /bert/) ? 1.05 : 1.10; if ($4 + 0 < 1 || $4 + 0 > bound) bad = 1 } END { exit (bad || n != 2) }'")
add_test(NAME bench_pool_replay_usage
         COMMAND sh -c "out=$($<TARGET_FILE:bench_pool_replay> 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q usage || exit 1; $<TARGET_FILE:bench_pool_replay> /nonexistent.trace 2>/dev/null; [ $? -eq 2 ]")
if(Python3_Interpreter_FOUND)
  add_test(NAME cli_replay
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli_replay_check.py
                   $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR} replay)
  add_test(NAME cli_bench
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli_replay_check.py
                   $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR} bench)
  set_tests_properties(cli_replay cli_bench PROPERTIES TIMEOUT 600)
  # fragmentation bounds on the bundled traces, replayed with the GPU's work lagging
  add_test(NAME replay_bounds
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/replay_bounds.py
                   $<TARGET_FILE:bench_replay_lag> ${CMAKE_SOURCE_DIR} $<TARGET_FILE:vram>)
  set_tests_properties(replay_bounds PROPERTIES TIMEOUT 600)
  # the placement-diff pair: bench_placements (vram) and expandable_model.py --placements (PyTorch)
  add_test(NAME placements_check
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/placements_check.py
                   $<TARGET_FILE:bench_placements> ${CMAKE_SOURCE_DIR})
  # the random workload's tools: bench_random_split's tables (calls by kind and by what they
  # asked of the device) and bench_random_floor's (vram beside the floor allocator)
  add_test(NAME random_workload_check
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/random_workload_check.py
                   $<TARGET_FILE:bench_random_split> $<TARGET_FILE:bench_random_floor>)
  # `cmake --install` of this build (cmake/install.cmake), then the installed command, a C program
  # built against it by find_package and by vram.pc, and the installed vram_torch package
  add_test(NAME install_check
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/install_check.py ${CMAKE_BINARY_DIR}
                   ${CMAKE_C_COMPILER} ${PROJECT_VERSION} ${CMAKE_INSTALL_LIBDIR} ${VRAM_INSTALL_PYTHONDIR}
                   ${CMAKE_SOURCE_DIR}/traces/gpt2_generate.trace.gz)
  set_tests_properties(install_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # `pip install` of the repository, its sdist and an editable install (pyproject.toml,
  # python/backend/vram_wheel.py), each built by the backend in folders of its own
  add_test(NAME pip_check
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/pip_check.py ${CMAKE_SOURCE_DIR} ${PROJECT_VERSION}
                   ${CMAKE_SOURCE_DIR}/traces/gpt2_generate.trace.gz)
  set_tests_properties(pip_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
else()
  message(NOTICE "vram: python3 not found: the end-to-end tests of the tools are not run")
endif()
# Trace loading as it is in a build without zlib (the built-in gzip decoder, src/trace/gunzip.c),
# whether or not this build found zlib: test_trace again, over trace.c compiled without it.
add_executable(test_trace_nozlib ${CMAKE_CURRENT_SOURCE_DIR}/test_trace.c ${CMAKE_SOURCE_DIR}/src/trace/trace.c)
target_compile_definitions(test_trace_nozlib PRIVATE _GNU_SOURCE VRAM_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
                           VRAM_BINARY_DIR="${CMAKE_BINARY_DIR}")
target_link_libraries(test_trace_nozlib PRIVATE vram_all)
add_test(NAME test_trace_nozlib COMMAND test_trace_nozlib)
# Every fuzz harness (tests/fuzz/fuzz_*.c) run over its seeds plus bounded mutations in every
# build, so none can rot (tests/fuzz/CMakeLists.txt); the libFuzzer binaries come from
# tests/CMakeLists.txt with -DVRAM_FUZZ=ON.
add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/fuzz ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
# ---- end tools -------------------------------------------------------------------------------

# ---- plan (issue 39): `vram plan` against real `vram train` runs, and its command line ----
# bench/plan_grid.py --quick: four configurations planned and trained (2 steps each), peak reserved
# within 3% (never under by more than 2%), and an out-of-memory run whose remedies, run for real
# under the same capacity, are within 10% of their planned peaks. The full grid: bench/results/.
if(Python3_Interpreter_FOUND)
  add_test(NAME plan_vs_train
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/bench/plan_grid.py --vram $<TARGET_FILE:vram>
                   --data ${VRAM_TRAIN_CORPUS} --quick --check --steps 2)
  set_tests_properties(plan_vs_train PROPERTIES TIMEOUT 600)
  # vram plan --device cuda against the GPU runs recorded on an H100 (no GPU needed)
  add_test(NAME plan_vs_gpu_runs COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/plan_gpu_check.py $<TARGET_FILE:vram>)
  set_tests_properties(plan_vs_gpu_runs PROPERTIES TIMEOUT 300)
  # plan_gpu_check.py's grid part on records made here: in bounds passes, off or unmeasured rows fail
  add_test(NAME test_plan_gpu_check
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_plan_gpu_check.py $<TARGET_FILE:vram>)
  set_tests_properties(test_plan_gpu_check PROPERTIES TIMEOUT 600)
  # python -m vram_torch fit on synthetic traces (no PyTorch): learn, synthesize, search by replay
  add_test(NAME test_vram_torch_fit
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_vram_torch_fit.py $<TARGET_FILE:vram>)
  set_tests_properties(test_vram_torch_fit PROPERTIES TIMEOUT 300)
  # issue 39's pure parts (leak finder, explain_oom, the categories record, fit -- train.py with a
  # stand-in for the program's runs): no PyTorch
  add_test(NAME test_vram_torch_plan_pure
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_vram_torch_plan_pure.py $<TARGET_FILE:vram>)
  set_tests_properties(test_vram_torch_plan_pure PROPERTIES TIMEOUT 300)
  # vram train --trace: the run's stream replays to its own peaks; an OOM run's trace fails again
  add_test(NAME train_trace
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_train_trace.py $<TARGET_FILE:vram>
                   ${VRAM_TRAIN_CORPUS})
  set_tests_properties(train_trace PROPERTIES TIMEOUT 300)
  # fit offline on four programs' streams recorded on an H100, against their real runs
  add_test(NAME fit_recorded_streams
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/fit_recorded_check.py $<TARGET_FILE:vram>)
  set_tests_properties(fit_recorded_streams PROPERTIES TIMEOUT 300)
endif()
vram_cli_test(cli_plan_fits 0 "peak reserved .*parameters .*reserved but free"
              "${VRAM_EXE} plan --model gpt:2x64x2 --context 32 --batch 8 --threads 1 --capacity 1GiB")
vram_cli_test(cli_plan_json 0 "\"peak_reserved\":[1-9][0-9]*,.*\"category_peaks\":\\{\"parameters\":"
              "${VRAM_EXE} plan --model gpt:2x64x2 --context 32 --batch 8 --threads 1 --json")
vram_cli_test(cli_plan_fit 0 "largest batch that fits in 24.00 MiB: [1-9][0-9]* "
              "${VRAM_EXE} plan --model gpt:2x64x2 --context 32 --threads 1 --capacity 24MiB --fit")
vram_cli_test(cli_plan_fit_batch1 1 "--fit: plan fit: batch 1 does not fit in 2097152 bytes"
              "${VRAM_EXE} plan --layers 8 --width 512 --heads 8 --capacity 2MiB --fit 2>&1")
vram_cli_test(cli_plan_does_not_fit 1 "does not fit in 8.00 MiB: out of memory at step 1.*what would fit.*checkpointing"
              "${VRAM_EXE} plan --batch 64 --threads 1 --capacity 8MiB 2>&1")
vram_cli_test(cli_plan_bad_model 2 "--model: model 'gpt:4x' is not gpt:LAYERSxWIDTH"
              "${VRAM_EXE} plan --model gpt:4x 2>&1")
vram_cli_test(cli_plan_bad_model_heads 2 "width 130 is not a multiple of 4 heads"
              "${VRAM_EXE} plan --model gpt:4x130 2>&1")
vram_cli_test(cli_plan_bf16 2 "--precision bf16 is mixed precision, which runs on the GPU: add --device cuda"
              "${VRAM_EXE} plan --precision bf16 2>&1")
vram_cli_test(cli_plan_bad_device 2 "--device tpu: not cpu or cuda"
              "${VRAM_EXE} plan --device tpu 2>&1")
vram_cli_test(cli_plan_bad_capacity 2 "--capacity: '0' is not a size above zero"
              "${VRAM_EXE} plan --capacity 0 2>&1")
vram_cli_test(cli_plan_huge_capacity 2 "vram plan: sim device: capacity .* is above 32 TiB"
              "${VRAM_EXE} plan --capacity 64TiB 2>&1")
vram_cli_test(cli_plan_unknown 2 "unknown option '--eval-every'" "${VRAM_EXE} plan --eval-every 5 2>&1")
# vram train out of memory: the categories at the failure and the remedies, planned
vram_cli_test(cli_train_oom_remedies 1 "at the failure: allocated .*reserved but free.*activations .*what would fit in 64.00 MiB.*batch halved +--batch 24 +[0-9.]+ MiB +yes"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --capacity 64MiB --batch 48 --steps 1 --threads 1 2>&1")
# ---- end plan
# ---- first run (issue 40, section 5): what a newcomer's first commands met, each checked ------
if(Python3_Interpreter_FOUND)
  add_test(NAME first_run
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/first_run_check.py
                   $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR} ${VRAM_TRAIN_CORPUS})
  set_tests_properties(first_run PROPERTIES TIMEOUT 600)
  # every C and shell block of the README, as a newcomer runs them (readme_check.py)
  set(VRAM_README_LINK "-lpthread -lm")
  if(CMAKE_DL_LIBS)
    string(APPEND VRAM_README_LINK " -l${CMAKE_DL_LIBS}")
  endif()
  if(ZLIB_FOUND)
    string(APPEND VRAM_README_LINK " -lz")
  endif()
  add_test(NAME readme
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/readme_check.py ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR} $<TARGET_FILE:vram> $<TARGET_FILE:vram_static> ${CMAKE_C_COMPILER}
                   "${VRAM_README_LINK}")
  set_tests_properties(readme PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # the layout rules: unique source names, one layer a library, the plug-in without the runtime
  add_test(NAME layout
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/layout_check.py ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
endif()
# ---- end first run ----
# ---- vram viz (issue 42): bad inputs without a browser; the page in headless Chromium ------
# (maintained with src/cli/viz*.c and src/cli/viz/; viz_chromium_install installs Debian's
# chromium where it is missing, and viz_browser reports itself skipped, saying why, where it can't)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME viz_inputs COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/viz_check.py
                                   $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR} inputs)
  add_test(NAME viz_chromium_install COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_chromium.sh)
  add_test(NAME viz_browser COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/viz_check.py
                                    $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR} browser)
  set_tests_properties(viz_chromium_install PROPERTIES FIXTURES_SETUP chromium TIMEOUT 900)
  set_tests_properties(viz_browser PROPERTIES FIXTURES_REQUIRED chromium SKIP_RETURN_CODE 77 TIMEOUT 900)
  set_tests_properties(viz_inputs PROPERTIES TIMEOUT 600)
endif()
# ---- inference (issue 43): model files, safetensors, generate, quantize from the command line ----
# test_infer.c (the library side) is picked up with the other test_*.c programs.
if(Python3_Interpreter_FOUND)
  add_test(NAME infer_cli COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_infer_cli.py
           $<TARGET_FILE:vram> ${VRAM_TRAIN_CORPUS})
  add_test(NAME safetensors_gpt2 COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_safetensors_gpt2.py
           $<TARGET_FILE:vram> ${VRAM_TRAIN_CORPUS})
  set_tests_properties(infer_cli safetensors_gpt2 PROPERTIES TIMEOUT 600)
endif()
vram_cli_test(cli_generate_no_model 2 "--model PATH is required" "${VRAM_EXE} generate --prompt x 2>&1")
vram_cli_test(cli_generate_missing_model 2 "model '/nonexistent/m.vram': cannot open"
              "${VRAM_EXE} generate --model /nonexistent/m.vram --prompt x 2>&1")
vram_cli_test(cli_train_save_every_alone 2 "--save-every needs --save PATH"
              "${VRAM_EXE} train --data ${VRAM_TRAIN_CORPUS} --save-every 3 2>&1")
# ---- end inference

# ---- learned placement (issue 46): bench_step_plan on the unseen Llama trace, its figures checked
# (vram 1.030, with the step plan 1.033 x peak requested on cudasim; 1.068 and 1.046 with
# chunk_divisor:0: bench/results/2026-12-06-placement.md)
add_test(NAME bench_step_plan_llama
         COMMAND $<TARGET_FILE:bench_step_plan> ${CMAKE_SOURCE_DIR}/traces/unseen/llama_train.trace.gz)
set_tests_properties(bench_step_plan_llama PROPERTIES
                     PASS_REGULAR_EXPRESSION "# machine: .*# command: .*[|] llama_train.trace.gz [|] 1[.]030 [|] [0-9]+ [|] 1[.]033 [|]")
add_test(NAME bench_step_plan_llama_divisor_off
         COMMAND ${CMAKE_COMMAND} -E env VRAM_ALLOC_CONF=chunk_divisor:0
                 $<TARGET_FILE:bench_step_plan> ${CMAKE_SOURCE_DIR}/traces/unseen/llama_train.trace.gz)
set_tests_properties(bench_step_plan_llama_divisor_off PROPERTIES
                     PASS_REGULAR_EXPRESSION "# machine: .*# command: .*[|] llama_train.trace.gz [|] 1[.]068 [|] [0-9]+ [|] 1[.]046 [|]")

# the six programs recorded on an H100 (bench/results/gpu-placement): replays against the GPU's
# figures (placement_fidelity.py), and placement_steady.py's ratios and driver calls per step
if(Python3_Interpreter_FOUND)
  add_test(NAME placement_replays
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_placement_replays.py $<TARGET_FILE:vram>
                   ${CMAKE_SOURCE_DIR})
  set_tests_properties(placement_replays PROPERTIES TIMEOUT 300)
  # early plans (docs/step_plan.md): checkpointed training under 1.03 on those recordings
  add_test(NAME step_plan_early
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_step_plan_early.py
                   $<TARGET_FILE:bench_step_plan> $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR})
  set_tests_properties(step_plan_early PROPERTIES TIMEOUT 300)
  # finer chunks for inference on changing shapes (chunk_min_mb:2,reserve_slack:0.01, opt-in,
  # docs/alloc_conf.md): ConvNeXt under 1.045, the other five within 0.003 under auto
  add_test(NAME placement_chunk_min
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_chunk_min.py
                   $<TARGET_FILE:bench_step_plan> $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR})
  set_tests_properties(placement_chunk_min PROPERTIES TIMEOUT 300)
  # layer plans (VRAM_STEP_PLAN=layers, docs/step_plan.md): generation under 1.045 on those recordings
  add_test(NAME step_plan_layers
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_step_plan_layers.py
                   $<TARGET_FILE:bench_step_plan> $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR})
  set_tests_properties(step_plan_layers PROPERTIES TIMEOUT 300)
  # auto plans (VRAM_STEP_PLAN=auto, docs/step_plan.md): each kind of program gets the preset that
  # suits it, decided from the stream; where neither suits, plain vram's placement, unchanged
  add_test(NAME step_plan_auto
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_step_plan_auto.py
                   $<TARGET_FILE:bench_step_plan> $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR})
  set_tests_properties(step_plan_auto PROPERTIES TIMEOUT 300)
  # the address-space model and the snapshot layout behind the account of generation's waste
  add_test(NAME placement_analysis
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_placement_analysis.py
                   $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR})
  set_tests_properties(placement_analysis PROPERTIES TIMEOUT 300)
endif()

# ---- faults (issue 41): tests/faults/faults.cmake
include(${CMAKE_CURRENT_SOURCE_DIR}/faults/faults.cmake)

# ---- data parallel (issue 44): tests/dist.cmake
include(${CMAKE_CURRENT_SOURCE_DIR}/dist.cmake)

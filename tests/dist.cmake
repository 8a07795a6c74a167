# ---- data parallel training (issue 44): tests/dist_check.py over mpirun, included by extra.cmake ----
# dist_mpi_install (tests/install_mpi.sh) installs Debian's Open MPI where it is missing; the parts
# that need it report themselves skipped, saying why, where it cannot be installed. The launcher
# part needs no MPI. test_dist.c (launcher variables, the TCP rendezvous, the gradient hook) is
# picked up with the other test_*.c programs.
if(Python3_Interpreter_FOUND)
  add_test(NAME dist_mpi_install COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_mpi.sh)
  set_tests_properties(dist_mpi_install PROPERTIES FIXTURES_SETUP mpi TIMEOUT 900)
  foreach(part launcher match faults)
    add_test(NAME dist_${part} COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/dist_check.py
                                       $<TARGET_FILE:vram> ${VRAM_TRAIN_CORPUS} ${part})
    # (Open MPI's own allocations at exit are not vram's leaks: lsan_mpi.supp names its libraries,
    # which the slow unwinder can see through: they are built without frame pointers)
    set_tests_properties(dist_${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 RESOURCE_LOCK mpi ENVIRONMENT
                         "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0;LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan_mpi.supp")
  endforeach()
  set_tests_properties(dist_match dist_faults PROPERTIES FIXTURES_REQUIRED mpi)
  add_test(NAME gpu_dist_nccl COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/dist_check.py
                                      $<TARGET_FILE:vram> ${VRAM_TRAIN_CORPUS} gpu)
  set_tests_properties(gpu_dist_nccl PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600 RESOURCE_LOCK gpu)
endif()
# ---- end data parallel

# ---- faults (issue 41): host allocation failure injection, files that change or block ----
# vram_faulty is the vram command with every host allocation of vram's own code numbered and
# the Nth made to fail on request (tests/faults/fail_alloc.c); fault_sweep.py runs a replay and
# a short training at every such point and checks each answer.
# (the same sources as vram, generated ones included: those are built with vram, hence the dependency)
get_target_property(VRAM_FAULTY_SOURCES vram SOURCES)
foreach(src ${VRAM_FAULTY_SOURCES})
  if(src MATCHES "^${CMAKE_BINARY_DIR}")
    set_source_files_properties(${src} PROPERTIES GENERATED TRUE)
  endif()
endforeach()
add_executable(vram_faulty ${VRAM_FAULTY_SOURCES} ${CMAKE_CURRENT_LIST_DIR}/fail_alloc.c)
add_dependencies(vram_faulty vram)
get_target_property(VRAM_FAULTY_DEFS vram COMPILE_DEFINITIONS)
target_compile_definitions(vram_faulty PRIVATE ${VRAM_FAULTY_DEFS})
target_link_libraries(vram_faulty PRIVATE vram_all)
target_link_options(vram_faulty PRIVATE -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup)
if(Python3_Interpreter_FOUND)
  add_test(NAME fault_sweep
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/fault_sweep.py $<TARGET_FILE:vram_faulty>
                   ${CMAKE_BINARY_DIR}/data/kjv.txt)
  set_tests_properties(fault_sweep PROPERTIES TIMEOUT 900)
endif()
# ---- end faults
# ---- smi --listen under misbehaving clients (issue 41): tests/test_smi_listen.c
if(TARGET test_smi_listen)
  add_dependencies(test_smi_listen fake_nvml vram)
  target_compile_definitions(test_smi_listen PRIVATE FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>" VRAM_EXE="$<TARGET_FILE:vram>")
  set_tests_properties(test_smi_listen PROPERTIES TIMEOUT 120)
endif()
# ---- files that block or change, and the small findings of issue 41: tests/faults/files_check.py
if(Python3_Interpreter_FOUND)
  add_test(NAME files_check
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/files_check.py $<TARGET_FILE:vram>
                   $<TARGET_FILE:fake_nvml> ${CMAKE_BINARY_DIR}/data/kjv.txt)
  set_tests_properties(files_check PROPERTIES TIMEOUT 600)
endif()
# The load bench, small and with a loose bound (a shared, loaded test machine; sanitizers): every
# scrape answered, none slower than 1 s, SIGTERM under load obeyed within 1 s. The recorded
# figures (200 clients, 100 ms) are bench/results/2026-12-06-smi-listen-load.md.
add_test(NAME bench_smi_listen_smoke
         COMMAND $<TARGET_FILE:bench_smi_listen> $<TARGET_FILE:vram> $<TARGET_FILE:fake_nvml>
                 --clients 60 --slow 20 --seconds 2 --runs 1 --bound-ms 1000)
set_tests_properties(bench_smi_listen_smoke PROPERTIES TIMEOUT 120)

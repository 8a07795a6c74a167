# ---- tools: vram replay / vram bench end to end, and the trace parser fuzz target ----------
# (maintained with src/trace and src/cli/{replay,bench}.c; keep other helpers' blocks apart)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME cli_replay
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli_replay_check.py
                   $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR} replay)
  add_test(NAME cli_bench
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli_replay_check.py
                   $<TARGET_FILE:vram> ${CMAKE_SOURCE_DIR} bench)
  set_tests_properties(cli_replay cli_bench PROPERTIES TIMEOUT 600)
else()
  message(STATUS "python3 not found: the vram replay/bench end-to-end tests are not run")
endif()
# Trace loading as it is in a build without zlib (the built-in gzip decoder, src/trace/gunzip.c),
# whether or not this build found zlib: test_trace again, over trace.c compiled without it.
add_executable(test_trace_nozlib ${CMAKE_CURRENT_SOURCE_DIR}/test_trace.c ${CMAKE_SOURCE_DIR}/src/trace/trace.c)
target_compile_definitions(test_trace_nozlib PRIVATE _GNU_SOURCE VRAM_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
                           VRAM_BINARY_DIR="${CMAKE_BINARY_DIR}")
target_link_libraries(test_trace_nozlib PRIVATE vram_static)
add_test(NAME test_trace_nozlib COMMAND test_trace_nozlib)
# The fuzz harness, run over its seed corpus on every build (so it cannot rot); with
# -DVRAM_FUZZ=ON and clang it is also built as a libFuzzer target (tests/fuzz/CMakeLists.txt).
add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/fuzz ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
# ---- end tools -------------------------------------------------------------------------------

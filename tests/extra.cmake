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
# The fuzz harness, run over its seed corpus on every build (so it cannot rot); with
# -DVRAM_FUZZ=ON and clang it is also built as a libFuzzer target (tests/fuzz/CMakeLists.txt).
add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/fuzz ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
# ---- end tools -------------------------------------------------------------------------------

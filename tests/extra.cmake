# ---- issue 3 (cuda branch): PyTorch plug-in tests ----------------------------------------
# The plug-in's Python side on a GPU with torch (label gpu; exits 77 = skipped without torch,
# a GPU or the library), and the trace converter of `python -m vram_torch record` (no torch).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME gpu_test_torch_plugin
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/gpu/test_torch_plugin.py
                   ${CMAKE_BINARY_DIR}/libvram_torch.so)
  set_tests_properties(gpu_test_torch_plugin PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600)
  add_test(NAME test_vram_torch_record
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_vram_torch_record.py)
endif()
# ---- end issue 3 --------------------------------------------------------------------------

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
# ---- end runtime ----

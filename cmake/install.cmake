# install.cmake — what `cmake --install BUILD [--prefix P]` puts where, for the two kinds of user:
#
#   P/bin/vram                                 the command (libvram linked in)
#   P/share/vram/kjv.txt                       the corpus `vram train` uses when given no --data
#   P/include/vram/*.h                         the public headers
#   P/LIBDIR/libvram.so.0.1.0, libvram.a       the allocator library, shared and static; beside it
#                                              libvram_runtime (the training runtime) and
#                                              libvram_smi (the NVML monitor), each needing libvram
#   P/LIBDIR/pkgconfig/vram.pc                 `pkg-config --cflags --libs vram` (relocatable; the
#                                              Libs carry an rpath, so a program finds the library
#                                              under any prefix); vram-runtime.pc, vram-smi.pc
#   P/LIBDIR/cmake/vram/                       find_package(vram): targets vram::vram (shared),
#                                              vram::vram_static, vram::vram_runtime[_static],
#                                              vram::vram_smi[_static]
#   P/PYTHONDIR/vram_torch/                    the PyTorch package, libvram_torch.so inside it (its
#                                              first place to look), so `import vram_torch` works
#                                              wherever PYTHONDIR is on Python's path
#
# PYTHONDIR (the cache variable VRAM_INSTALL_PYTHONDIR) defaults to the site-packages folder that
# the Python found at configure time would use under P (lib/python3.X/site-packages), so that
# `cmake --install build --prefix "$VIRTUAL_ENV"` (or a conda prefix) needs nothing more; Debian's
# system Python reads dist-packages instead: give -DVRAM_INSTALL_PYTHONDIR or set PYTHONPATH.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

find_package(Python3 COMPONENTS Interpreter QUIET)
set(vram_default_pythondir "${CMAKE_INSTALL_LIBDIR}/vram/python")
if(Python3_Interpreter_FOUND)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c
            "import sysconfig; print(sysconfig.get_path('purelib', 'posix_prefix', {'base': '', 'platbase': ''}).lstrip('/'))"
    OUTPUT_VARIABLE vram_site OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE vram_site_rc ERROR_QUIET)
  if(vram_site_rc EQUAL 0 AND vram_site MATCHES "^lib")
    set(vram_default_pythondir "${vram_site}")
  endif()
endif()
set(VRAM_INSTALL_PYTHONDIR "${vram_default_pythondir}" CACHE STRING
    "Where `cmake --install` puts the vram_torch package, relative to the prefix")

install(TARGETS vram RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# (decompressed into the build tree at configure time: tests/extra.cmake; train.c looks for it in
# ../share/vram/ beside its bin/, so the data folder is share/vram whatever DATADIR says)
install(FILES ${CMAKE_BINARY_DIR}/data/kjv.txt DESTINATION share/vram)
install(TARGETS vram_shared vram_static vram_runtime_shared vram_runtime_static vram_smi_shared vram_smi_static
        EXPORT vramTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}) # (their include folder: CMakeLists.txt's INSTALL_INTERFACE)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/vram DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT vramTargets NAMESPACE vram:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vram)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/vramConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/vramConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vram)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/vramConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion) # 0.x: minor versions may break
install(FILES ${CMAKE_BINARY_DIR}/vramConfig.cmake ${CMAKE_BINARY_DIR}/vramConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vram)

# vram.pc finds its prefix from its own place (${pcfiledir}), so that --prefix at install time
# holds whatever the prefix was at configure time.
file(RELATIVE_PATH VRAM_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
set(VRAM_PC_LIBS_PRIVATE "-lpthread -lm")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND VRAM_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
if(ZLIB_FOUND)
  string(APPEND VRAM_PC_LIBS_PRIVATE " -lz")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/vram.pc.in ${CMAKE_BINARY_DIR}/vram.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/vram.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
foreach(part runtime smi)
  set(VRAM_PC_NAME vram-${part})
  set(VRAM_PC_LIB vram_${part})
  if(part STREQUAL "runtime")
    set(VRAM_PC_DESCRIPTION "vram's training runtime: tensors, autograd, ops, optimizers, every byte through libvram")
  else()
    set(VRAM_PC_DESCRIPTION "vram's GPU memory monitor: NVML loaded at run time, per device and per process")
  endif()
  configure_file(${CMAKE_SOURCE_DIR}/cmake/vram-part.pc.in ${CMAKE_BINARY_DIR}/vram-${part}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/vram-${part}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/vram_torch DESTINATION ${VRAM_INSTALL_PYTHONDIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(TARGETS vram_torch LIBRARY DESTINATION ${VRAM_INSTALL_PYTHONDIR}/vram_torch)

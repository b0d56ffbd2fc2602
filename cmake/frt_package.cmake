# frt_package.cmake - the files that let other builds use an installed frt
# (docs/install.md): pkg-config files frt.pc and frt_serving.pc, and the CMake
# package frtConfig.cmake with the imported targets frt::frt and
# frt::frt_serving. Included from the top-level CMakeLists.txt after the
# targets and their install rules.
include(CMakePackageConfigHelpers)

# pkg-config. The prefix is written at install time (the --prefix of
# `cmake --install`, else CMAKE_INSTALL_PREFIX), so `cmake --install build
# --prefix DIR` gives files right for DIR whatever the prefix at configure
# time; DESTDIR staging keeps the final prefix. Libs.private lists the
# libraries a static link (`pkg-config --static --libs frt`, libfrt.a) needs;
# a shared link needs only -lfrt (its dependencies are NEEDED entries of
# libfrt.so).
set(FRT_PC_PREFIX "@FRT_PC_INSTALL_PREFIX@") # filled in by the install(CODE) below
function(frt_pc_flags out)
  set(flags)
  foreach(dep ${ARGN})
    list(APPEND flags ${${dep}_LDFLAGS})
  endforeach()
  list(REMOVE_DUPLICATES flags)
  string(JOIN " " flags ${flags})
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()
frt_pc_flags(FRT_PC_CORE_PRIVATE JANSSON PCRE2 UTF8PROC XXHASH OPENBLAS CRYPTO LIBZIP SENTENCEPIECE LIBPNG LIBJPEG)
# -lstdc++: the C++ shim over libsentencepiece (src/policy/spm_shim.cc).
set(FRT_PC_CORE_PRIVATE "${FRT_PC_CORE_PRIVATE} -lstdc++ -lgomp -lpthread -lm")
if(FRT_HAVE_CUDA)
  set(FRT_PC_CORE_PRIVATE
      "${FRT_PC_CORE_PRIVATE} -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lcublasLt -ldl -lrt")
endif()
frt_pc_flags(FRT_PC_SERVING_PRIVATE SQLITE3 MHD LWS MSGPACK JANSSON XXHASH)
set(FRT_PC_SERVING_PRIVATE "${FRT_PC_SERVING_PRIVATE} -lpthread -lm")
foreach(pc frt frt_serving)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/${pc}.pc.in ${CMAKE_BINARY_DIR}/pc/${pc}.pc.in @ONLY)
  install(CODE "set(FRT_PC_INSTALL_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${CMAKE_BINARY_DIR}/pc/${pc}.pc.in\" \"${CMAKE_BINARY_DIR}/pc/${pc}.pc\" @ONLY)")
  install(FILES ${CMAKE_BINARY_DIR}/pc/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# CMake: find_package(frt) -> frt::frt (libfrt.so) and frt::frt_serving
# (libfrt_serving.so, which brings frt::frt), plus frt_DATA_DIR.
set(FRT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/frt)
install(EXPORT frtTargets NAMESPACE frt:: DESTINATION ${FRT_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/frtConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/frtConfig.cmake
                              INSTALL_DESTINATION ${FRT_CMAKE_DIR}
                              PATH_VARS CMAKE_INSTALL_DATADIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/frtConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/frtConfig.cmake ${CMAKE_BINARY_DIR}/frtConfigVersion.cmake
        DESTINATION ${FRT_CMAKE_DIR})

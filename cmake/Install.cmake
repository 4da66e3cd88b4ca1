# `cmake --install <build> --prefix <prefix>` (docs/building.md "Installing"):
#   <prefix>/bin/aotc                          the compiler
#   <prefix>/lib/libaotc_runtime.a             the C++ runtime (aotc/runtime.h, trainer.h)
#   <prefix>/lib/libaotc_kernels.so            the convolutions objects call (aotc/kernels.h)
#   <prefix>/lib/libaotc_mpi.a, .so            the MPI communicator (aotc/mpi.h; the .so for Python), when MPI was found
#   <prefix>/include/aotc/*.h                  abi.h, runtime.h, safetensors.h, trainer.h, kernels.h
#   <prefix>/lib/cmake/aotc/aotcConfig.cmake   find_package(aotc): the imported targets
#       aotc::aotc, aotc::runtime, aotc::kernels and aotc_add_model() (cmake/aotcModelFunctions.cmake)
# Nothing installed names a path of this machine: libomp and OpenBLAS are found again by
# the consumer's find_library/find_package (aotcConfig.cmake), and the installed aotc finds
# libaotc_kernels.so through $ORIGIN/../lib and LLVM's shared library through LLVM's
# library directory as this configure found it (LLVM_LIBRARY_DIR).
# Not installed: the CUDA runtime (runtime/cuda; not yet run on a GPU, docs/cuda.md) and the
# NCCL communicator (runtime/nccl, aotc/nccl.h; tested against a fake only, docs/distributed.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(AOTC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/aotc)

set_target_properties(aotc PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR};${LLVM_LIBRARY_DIR}")
set_target_properties(aotc_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(aotc_kernels PROPERTIES EXPORT_NAME kernels)
set_target_properties(aotc_runtime_shared PROPERTIES EXPORT_NAME runtime_shared)
install(TARGETS aotc EXPORT aotcTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS aotc_runtime aotc_runtime_shared aotc_kernels EXPORT aotcTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${AOTC_SRC_ROOT}/runtime/include/aotc/abi.h ${AOTC_SRC_ROOT}/runtime/include/aotc/capi.h
              ${AOTC_SRC_ROOT}/runtime/include/aotc/runtime.h
              ${AOTC_SRC_ROOT}/runtime/include/aotc/safetensors.h ${AOTC_SRC_ROOT}/runtime/include/aotc/trainer.h
              ${AOTC_SRC_ROOT}/runtime/include/aotc/kernels.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/aotc)
install(EXPORT aotcTargets NAMESPACE aotc:: DESTINATION ${AOTC_INSTALL_CMAKEDIR})
# aotc::mpi (aotc/mpi.h) when MPI was found: an export set of its own, which aotcConfig.cmake
# loads when the consumer's find_package(MPI) succeeds too.
if(TARGET aotc_mpi)
  set_target_properties(aotc_mpi PROPERTIES EXPORT_NAME mpi)
  install(TARGETS aotc_mpi EXPORT aotcMpiTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES ${AOTC_SRC_ROOT}/runtime/include/aotc/mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/aotc)
  install(EXPORT aotcMpiTargets NAMESPACE aotc:: DESTINATION ${AOTC_INSTALL_CMAKEDIR})
  # libaotc_mpi.so: the same with a C entry, for the Python package (beside libaotc_runtime.so).
  install(TARGETS aotc_mpi_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
configure_package_config_file(${AOTC_SRC_ROOT}/cmake/aotcConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/aotcConfig.cmake INSTALL_DESTINATION ${AOTC_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/aotcConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/aotcConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/aotcConfigVersion.cmake
              ${AOTC_SRC_ROOT}/cmake/aotcModelFunctions.cmake
        DESTINATION ${AOTC_INSTALL_CMAKEDIR})

# aotc_add_model(<target> SOURCE <model> [NAME <c-name>] [FLAGS <aotc flags>...] [DEPENDS <files>...])
#
# Installed with aotc (find_package(aotc), docs/building.md "Installing"). Runs aotc at build
# time on SOURCE (a .pt2, ExportedProgram JSON or FX text; relative to the current source
# directory):
#   ${CMAKE_CURRENT_BINARY_DIR}/<target>/<name>.o, <name>.h, <name>.weights.safetensors
# and makes <target> a static library holding the object. Linking it gives the header's
# directory and the libraries an object needs, in this order: aotc::runtime, LLVM's libomp
# (AOTC_OMP_LIBRARY), aotc::kernels (oneDNN convolutions), BLAS, libm. libomp precedes
# libaotc_kernels (whose libdnnl needs libgomp): the process's one OpenMP runtime.
# NAME defaults to <target>; FLAGS are aotc's (e.g. --optimizer=adamw:lr=1e-3). The project
# needs C++ enabled (the runtime is C++20; aotc::runtime carries cxx_std_20), nothing else.
# Target properties set: AOTC_NAME, AOTC_HEADER, AOTC_WEIGHTS (the weights file to load).
#
#   find_package(aotc REQUIRED)
#   aotc_add_model(mlp SOURCE mlp.pt2 FLAGS --optimizer=sgd:lr=0.1)
#   add_executable(train main.cpp)       # #include "mlp.h", aotc/trainer.h
#   target_link_libraries(train PRIVATE mlp)
function(aotc_add_model target)
  cmake_parse_arguments(A "" "SOURCE;NAME" "FLAGS;DEPENDS" ${ARGN})
  if(NOT A_SOURCE)
    message(FATAL_ERROR "aotc_add_model(${target}): SOURCE <model> is required")
  endif()
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "aotc_add_model(${target}): unknown arguments: ${A_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT A_NAME)
    set(A_NAME ${target})
  endif()
  if(NOT A_NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "aotc_add_model(${target}): NAME '${A_NAME}' is not a C identifier")
  endif()
  get_property(_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CXX" IN_LIST _langs)
    message(FATAL_ERROR "aotc_add_model(${target}): the model links aotc's C++ runtime; enable C++ "
                        "in project() (e.g. project(x CXX))")
  endif()
  get_filename_component(_src ${A_SOURCE} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/${target})
  set(_obj ${_dir}/${A_NAME}.o)
  file(MAKE_DIRECTORY ${_dir})
  add_custom_command(
    OUTPUT ${_obj} ${_dir}/${A_NAME}.h ${_dir}/${A_NAME}.weights.safetensors
    COMMAND aotc::aotc ${_src} -o ${_obj} --name ${A_NAME} ${A_FLAGS}
    DEPENDS ${_src} $<TARGET_FILE:aotc::aotc> ${A_DEPENDS}
    COMMENT "aotc ${A_SOURCE} -> ${_obj}"
    VERBATIM)
  set_source_files_properties(${_obj} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(${target} STATIC ${_obj} ${_dir}/${A_NAME}.h)
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX AOTC_NAME ${A_NAME}
    AOTC_HEADER ${_dir}/${A_NAME}.h AOTC_WEIGHTS ${_dir}/${A_NAME}.weights.safetensors)
  target_include_directories(${target} INTERFACE ${_dir})
  target_link_libraries(${target} INTERFACE aotc::runtime ${AOTC_OMP_LIBRARY} aotc::kernels BLAS::BLAS m)
endfunction()

# aotc_model(<var> SOURCE <model> NAME <c-name> DIR <dir> [FLAGS <aotc flags>...] [DEPENDS <files>...]
#            [NOSANITIZE])
#
# Compiles a model with aotc at build time (a custom command):
#   <dir>/<name>.o, <dir>/<name>.h, <dir>/<name>.weights.safetensors
# and sets <var>_OBJECT, <var>_HEADER, <var>_WEIGHTS, <var>_DIR in the caller's scope.
# Add ${<var>_OBJECT} and ${<var>_HEADER} to an executable's sources and
# ${<var>_DIR} to its include directories to link the compiled training step.
# AOTC_HOST_AOTC, when set, is the aotc that compiles (the sanitizer suites: the normal build's).
# In a sanitizer build (AOTC_SANITIZER) CPU models are compiled with --sanitize=<mode>, so
# the generated code runs instrumented in every test that links it; NOSANITIZE opts out
# (an object compared byte for byte with a plain one, or linked without the runtime).
# AOTC_MODEL_CPU (a variable of the caller's scope; test/CMakeLists.txt sets `host`) becomes
# --cpu=<value> unless FLAGS has a --cpu: the tests compile one x86-64 level, a third of the
# default multiversioned object's LLVM time (docs/testing.md "CPU levels in the tests").
function(aotc_model var)
  cmake_parse_arguments(A "NOSANITIZE" "SOURCE;NAME;DIR" "FLAGS;DEPENDS" ${ARGN})
  if(AOTC_SANITIZER AND NOT A_NOSANITIZE AND NOT "--target=cuda" IN_LIST A_FLAGS)
    list(APPEND A_FLAGS --sanitize=${AOTC_SANITIZER})
  endif()
  if(AOTC_MODEL_CPU AND NOT "--target=cuda" IN_LIST A_FLAGS)
    set(_cpu_given ${A_FLAGS})
    list(FILTER _cpu_given INCLUDE REGEX "^--cpu")
    if(NOT _cpu_given)
      list(APPEND A_FLAGS --cpu=${AOTC_MODEL_CPU})
    endif()
  endif()
  set(_obj ${A_DIR}/${A_NAME}.o)
  set(_hdr ${A_DIR}/${A_NAME}.h)
  # FX graph code has no weights: aotc writes no weights file, which as a declared output
  # would make the model recompile on every build.
  if(A_SOURCE MATCHES "\\.fx\\.txt$")
    set(_wts)
  else()
    set(_wts ${A_DIR}/${A_NAME}.weights.safetensors)
  endif()
  file(MAKE_DIRECTORY ${A_DIR})
  # AOTC_HOST_AOTC (the sanitizer suites: the normal build's aotc) compiles the model if set.
  if(AOTC_HOST_AOTC)
    set(_aotc ${AOTC_HOST_AOTC})
    if(TARGET aotc_host)
      list(APPEND A_DEPENDS aotc_host)
    endif()
  else()
    set(_aotc aotc)
  endif()
  add_custom_command(
    OUTPUT ${_obj} ${_hdr} ${_wts}
    COMMAND ${_aotc} ${A_SOURCE} -o ${_obj} --name ${A_NAME} ${A_FLAGS}
    DEPENDS ${_aotc} ${A_SOURCE} ${A_DEPENDS}
    COMMENT "aotc ${A_SOURCE} -> ${_obj}"
    VERBATIM)
  set_source_files_properties(${_obj} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  set(${var}_OBJECT ${_obj} PARENT_SCOPE)
  set(${var}_HEADER ${_hdr} PARENT_SCOPE)
  set(${var}_WEIGHTS ${_wts} PARENT_SCOPE)
  set(${var}_DIR ${A_DIR} PARENT_SCOPE)
endfunction()

# aotc_link_step(<target>): what an executable linking an aotc object needs:
# the runtime, LLVM's libomp (parallel loops), libaotc_kernels (convolutions; it brings
# oneDNN), OpenBLAS (GEMMs) and libm. libomp comes before libaotc_kernels (and so before
# libdnnl and its libgomp) in the executable's DT_NEEDED: the one OpenMP runtime of the
# process, serving libdnnl's GOMP_* calls too (docs/building.md "One OpenMP runtime").
function(aotc_link_step target)
  target_link_libraries(${target} PRIVATE aotc_runtime ${AOTC_OMP_LIB} aotc_kernels ${BLAS_LIBRARIES} m)
endfunction()

import os, lit.formats
from lit.llvm import llvm_config

config.name = "aotc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".test", ".txt.test", ".py.test"]
config.excludes = ["Inputs"]
# A hang fails its own test (cmake/TestTimeouts.cmake, AOTC_LIT_TIMEOUT; needs psutil in the
# python running lit: test/CMakeLists.txt runs lit under Debian's python3).
lit_config.maxIndividualTestTime = int(getattr(config, "aotc_lit_timeout", 0) or 0)
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.aotc_bin_dir, "test", "lit")
llvm_config.with_system_environment(["HOME", "TMP", "TEMP", "PATH"])
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(["FileCheck", "not", "count", "llvm-objdump"], [config.llvm_tools_dir])
config.substitutions.append(("%aotc", os.path.join(config.aotc_bin_dir, "tools", "aotc", "aotc")))
config.substitutions.append(("%srcroot", config.aotc_src_root))
config.substitutions.append(("%python", config.python_executable))
# Sanitizer suites (docs/testing.md): the mode of this build, as a feature and as the flag
# that compiles generated code the same way (`aotc run %sanitize`, empty elsewhere).
san = getattr(config, "aotc_sanitizer", "")
if san:
    config.available_features.add({"address": "asan", "thread": "tsan"}[san])
config.substitutions.append(("%sanitize_flag", f"--flag=--sanitize={san}" if san else ""))
config.substitutions.append(("%sanitize", f"--sanitize={san}" if san else ""))
# The sanitizers' runtime options (scripts/sanitizer-env.sh) reach aotc and the drivers.
llvm_config.with_system_environment(["ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
                                     "TSAN_OPTIONS", "OMP_TOOL_LIBRARIES", "ARCHER_OPTIONS"])

# The CUDA target needs the toolkit's libdevice to build PTX and ptxas to check it
# (docs/cuda.md); tests that need them say `REQUIRES: cuda-toolkit`.
cuda = os.environ.get("AOTC_CUDA_TOOLKIT", "/usr/local/cuda")
config.substitutions.append(("%cuda", cuda))
if all(os.path.exists(os.path.join(cuda, f)) for f in ("bin/ptxas", "nvvm/libdevice/libdevice.10.bc")):
    config.available_features.add("cuda-toolkit")

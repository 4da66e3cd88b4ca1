#!/usr/bin/env bash
# Installs the Debian packages aotc builds with (and, with --example, the example's) (see docs/building.md and
# ../shared/reference/deps.md). Skips apt entirely when everything is present.
set -euo pipefail
pkgs=(llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools clang-19 lld-19 libomp-19-dev
      nlohmann-json3-dev libcli11-dev catch2 libyaml-cpp-dev libzip-dev libopenblas-dev libdnnl-dev
      libclang-rt-19-dev cmake ninja-build python3 pkg-config
      python3-venv python3-setuptools python3-wheel python3-psutil python3-pythran libboost-dev g++
      libopenmpi-dev openmpi-bin)
# python3-pythran: PocketFFT's header (pythran/pythonic/numpy/fft/pocketfft.hpp), libaotc_kernels' FFTs.
# g++: the default C++ compiler the install test and the doc examples build users' projects with.
# libboost-dev: Boost.Math (header-only), the special functions (include/aotc/SpecialMath.h).
# python3-psutil: lit's per-test timeout (cmake/TestTimeouts.cmake).
# libopenmpi-dev openmpi-bin: aotc::mpi, the data-parallel communicator, and its tests (mpirun).
# --example: also what README command 1's digits example plots with (Debian's matplotlib).
[ "${1:-}" = "--example" ] && pkgs+=(python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

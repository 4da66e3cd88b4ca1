#!/usr/bin/env bash
# README command 1: installs missing packages, builds aotc, and runs an example.
#
#   scripts/run-example.sh [digits]   (default) compiles examples/digits/digits.pt2 with
#       --optimizer=adamw (and digits_eval.pt2, its eval-mode export), trains the CNN on
#       scikit-learn's digits in C++ for 20 epochs, writes out/digits-metrics.csv and
#       out/digits-curves.png; the last line is
#         digits: epochs=20 train_seconds=... test_accuracy=...
#   scripts/run-example.sh charlm   the nanoGPT-style character LM trained for 3 minutes on the
#       licenses Debian ships (/usr/share/common-licenses), then a greedy sample (examples/charlm)
#   scripts/run-example.sh mlp      the MLP's 20 SGD steps, checked against PyTorch's golden
#   scripts/run-example.sh digits --ranks N   the digits CNN data parallel on N MPI ranks of
#       one thread each (mpirun -np N on this machine; docs/distributed.md): the same 20
#       epochs with N batches of 64 per step; charlm --ranks N likewise (N x 32 windows a step)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${AOTC_BUILD_DIR:-$root/build}
example=${1:-digits}
ranks=1
if [ "${2:-}" = "--ranks" ] && [ -n "${3:-}" ]; then ranks=$3; fi
cd "$root"
case "$example" in
  digits|charlm|mlp) ;;
  *) echo "usage: scripts/run-example.sh [digits|charlm [--ranks N]|mlp]" >&2; exit 1 ;;
esac
if [ "$ranks" != 1 ] && { [ "$example" = mlp ] || ! [[ "$ranks" =~ ^[1-9][0-9]*$ ]]; }; then
  echo "scripts/run-example.sh: --ranks N (a positive number) is for the digits and charlm examples" >&2; exit 1
fi
# Data parallel (docs/distributed.md): N ranks of one thread on this machine; Open MPI refuses
# root unless told.
mpirun_n() {
  [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMP_NUM_THREADS=1 mpirun -np "$ranks" --oversubscribe --mca btl self,vader "$@"
}

bash scripts/install-deps.sh --example
AOTC_BUILD_DIR=$build bash scripts/build.sh
mkdir -p out

case "$example" in
digits)
  if [ "$ranks" != 1 ]; then
    cmake --build "$build" --target digits_dp_example -j "${AOTC_JOBS:-2}"
    echo "+ mpirun -np $ranks digits_dp_example (20 epochs, AdamW, data parallel)"
    mpirun_n "$build/examples/digits/digits_dp_example" "$build/examples/digits/dp/digits.weights.safetensors" \
      examples/digits/digits.safetensors out/digits-dp-metrics.csv 20 | tee out/digits-dp-example.log
    exit 0
  fi
  cmake --build "$build" --target digits_example -j "${AOTC_JOBS:-2}"
  echo "+ digits_example (20 epochs, AdamW)"
  "$build/examples/digits/digits_example" "$build/examples/digits/digits.weights.safetensors" \
    examples/digits/digits.safetensors out/digits-metrics.csv 20 | tee out/digits-example.log
  # The plot prints nothing, so the example's line stays the last.
  /usr/bin/python3 examples/digits/plot.py out/digits-metrics.csv out/digits-curves.png
  ;;
charlm)
  mapfile -t texts < <(find /usr/share/common-licenses -maxdepth 1 -type f | LC_ALL=C sort)
  if [ "$ranks" != 1 ]; then
    cmake --build "$build" --target charlm_dp_example -j "${AOTC_JOBS:-2}"
    echo "+ mpirun -np $ranks charlm_dp_example (3 minutes, data parallel)"
    mpirun_n "$build/examples/charlm/charlm_dp_example" "$build/examples/charlm/dp/charlm.weights.safetensors" \
      "${texts[@]}" --seconds=180 | tee out/charlm-dp-example.log
    exit 0
  fi
  cmake --build "$build" --target charlm_example -j "${AOTC_JOBS:-2}"
  echo "+ charlm_example (3 minutes)"
  "$build/examples/charlm/charlm_example" "$build/examples/charlm/charlm.weights.safetensors" \
    "${texts[@]}" --seconds=180 | tee out/charlm-example.log
  ;;
mlp)
  cmake --build "$build" --target mlp_example -j "${AOTC_JOBS:-2}"
  echo "+ mlp_example (20 SGD steps)"
  "$build/examples/mlp/mlp_example" "$build/examples/mlp/mlp.weights.safetensors" \
    examples/mlp/golden.safetensors out/mlp-result.safetensors > out/mlp-example.log
  echo "+ tools/check_golden.py out/mlp-result.safetensors examples/mlp/golden.safetensors"
  python3 tools/check_golden.py out/mlp-result.safetensors examples/mlp/golden.safetensors
  tail -n 1 out/mlp-example.log
  ;;
esac

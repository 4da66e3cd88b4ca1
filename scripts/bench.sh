#!/usr/bin/env bash
# One benchmark command (docs/benchmarks.md): aotc (C++ runtime and Python module) vs
# torch eager vs torch.compile, 1 and 2 threads, twice, with the machine's ceilings
# (STREAM triad, OpenBLAS sgemm, torch.mm, aotc's pointwise probe). Writes
# docs/benchmarks.json and renders docs/benchmarks.md from it. About 25 minutes on
# 2 cores (10-12 without the three LM rows, whose torch.compile cases take ~40 s each:
# --models to pick rows; docs/benchmarks-lm.md and -cnn.md were runs of subsets). Needs torch: tools/export/torch-python.sh ($AOTC_TORCH_PYTHON, else setup-venv.sh's venv).
# Arguments go to tools/bench/bench.py (--quick: smoke test with tiny iteration counts;
# --reps N; --no-large; --out FILE --md FILE to write elsewhere). `scripts/bench.sh --distributed`
# runs the data-parallel benchmark (tools/bench/bench_dp.py) instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${AOTC_BUILD_DIR:-$root/build}
py=$("$root/tools/export/torch-python.sh")
if ! "$py" -c "import torch, safetensors" 2>/dev/null; then
  echo "bench.sh: needs a python with torch and safetensors: set AOTC_TORCH_PYTHON or run" \
       "tools/export/setup-venv.sh (tried '$py')" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
fi
# --distributed: the data-parallel benchmark instead (tools/bench/bench_dp.py, mpirun; writes
# docs/benchmarks-distributed.{json,md}; about 10 minutes).
if [ "${1:-}" = "--distributed" ]; then
  shift
  cmake --build "$build" -j "${AOTC_JOBS:-2}" --target aotc bench_dp
  # shellcheck source=openblas-env.sh
  source "$root/scripts/openblas-env.sh" "$build/tools/aotc/aotc"
  exec python3 "$root/tools/bench/bench_dp.py" --build "$build" --torch-python "$py" "$@"
fi
# Only what the benchmark runs: the compiler and the three bench tools.
cmake --build "$build" -j "${AOTC_JOBS:-2}" --target aotc bench_step bench_stream_triad bench_sgemm
# shellcheck source=openblas-env.sh
source "$root/scripts/openblas-env.sh" "$build/tools/aotc/aotc"
exec python3 "$root/tools/bench/bench.py" --build "$build" --torch-python "$py" "$@"

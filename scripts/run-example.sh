#!/usr/bin/env bash
# README command 1: installs missing packages, builds aotc, compiles the MLP
# (examples/mlp/mlp.pt2) into build/examples/mlp/mlp.{o,h,weights.safetensors},
# links the C++ example with it and the runtime, trains 20 SGD steps, writes
# out/mlp-result.safetensors and checks it against the PyTorch golden.
# The example's last line is
#   mlp: steps=20 loss_first=... loss_last=... max_rel_grad_err=... max_rel_loss_err=...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${AOTC_BUILD_DIR:-$root/build}
cd "$root"

bash scripts/install-deps.sh
AOTC_BUILD_DIR=$build bash scripts/build.sh

mkdir -p "$build/examples/mlp" out
echo "+ aotc examples/mlp/mlp.pt2 -o $build/examples/mlp/mlp.o"
"$build/tools/aotc/aotc" examples/mlp/mlp.pt2 -o "$build/examples/mlp/mlp.o"
cmake --build "$build" --target mlp_example -j "${AOTC_JOBS:-2}"

echo "+ mlp_example (20 SGD steps)"
"$build/examples/mlp/mlp_example" "$build/examples/mlp/mlp.weights.safetensors" \
  examples/mlp/golden.safetensors out/mlp-result.safetensors > out/mlp-example.log
echo "+ tools/check_golden.py out/mlp-result.safetensors examples/mlp/golden.safetensors"
python3 tools/check_golden.py out/mlp-result.safetensors examples/mlp/golden.safetensors
# The example's line last, as promised.
tail -n 1 out/mlp-example.log

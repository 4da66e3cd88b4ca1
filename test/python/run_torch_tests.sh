#!/usr/bin/env bash
# ctest python.torch: the torch layer's tests (test_torch, test_train_torch, test_ddp_torch) plus the core
# tests again under the torch python (numpy present there, so the numpy paths run too).
# Skipped (exit 77) unless AOTC_WITH_TORCH=1 (scripts/test.sh --with-torch): test/run_with_torch.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
exec bash "$here/../run_with_torch.sh" -m unittest -v test_torch test_train_torch test_ddp_torch test_core test_safetensors

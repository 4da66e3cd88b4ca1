#!/usr/bin/env bash
# ctest python.torch: the torch layer's tests (test_torch) plus the core tests again under
# the torch python (numpy present there, so the numpy paths run too).
# Skipped (exit 77, ctest SKIP_RETURN_CODE) unless AOTC_WITH_TORCH=1, which
# `scripts/test.sh --with-torch` sets; then a missing torch is a failure.
# Python: tools/export/torch-python.sh ($AOTC_TORCH_PYTHON, else the venv of setup-venv.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ "${AOTC_WITH_TORCH:-0}" != 1 ]]; then
  echo "skipped: PyTorch tests run only with scripts/test.sh --with-torch (AOTC_WITH_TORCH=1)"
  exit 77
fi
py="$("$root/tools/export/torch-python.sh")"
if [[ ! -x "$py" ]] || ! "$py" -c "import torch" 2>/dev/null; then
  echo "error: --with-torch needs a python with torch: '$py' has none;" \
       "set AOTC_TORCH_PYTHON or run tools/export/setup-venv.sh" >&2
  exit 1
fi
cd "$here"
exec "$py" -m unittest -v test_torch test_train_torch test_core test_safetensors

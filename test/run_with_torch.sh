#!/usr/bin/env bash
# Runs a PyTorch test script with the torch python (ctest label 'torch'):
#   run_with_torch.sh SCRIPT ARGS...
# Skipped (exit 77, ctest SKIP_RETURN_CODE) unless AOTC_WITH_TORCH=1 (scripts/test.sh
# --with-torch); then a python without torch is a failure. The python:
# tools/export/torch-python.sh ($AOTC_TORCH_PYTHON, else the venv of setup-venv.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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
exec "$py" "$@"

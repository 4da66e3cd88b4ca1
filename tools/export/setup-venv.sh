#!/usr/bin/env bash
# Creates tools/export/.venv with PyPI torch + safetensors + numpy (several GB; the CUDA
# wheel runs on the CPU). Only needed to REGENERATE fixtures; the tests never need torch.
# Usage: tools/export/setup-venv.sh            (idempotent)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
if [[ ! -x "$here/.venv/bin/python" ]]; then
  "$py" -m venv "$here/.venv"
fi
"$here/.venv/bin/pip" install --upgrade pip
"$here/.venv/bin/pip" install torch safetensors numpy
"$here/.venv/bin/python" -c "import torch, safetensors; print('torch', torch.__version__)"

#!/usr/bin/env bash
# Creates the torch venv outside the repository (see torch-python.sh for where: $AOTC_VENV,
# default ~/.cache/aotc/venv-torch-2.15.0) with the pinned versions every fixture and golden
# of this repository was made with. The torch wheel is the CUDA build from PyPI (several GB;
# it runs on the CPU). Only needed to REGENERATE fixtures and goldens, for the benchmarks and
# for --with-torch tests; the default test run never needs torch.
# Usage: tools/export/setup-venv.sh            (idempotent; reuses an existing venv)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${AOTC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/aotc/venv-torch-2.15.0}"
py="${PYTHON:-python3}"
# The pins (tools/export/README.md): change them together with the fixtures they made.
pins=(torch==2.15.0 torchvision==0.29.2 transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6 expecttest==0.3.0)
if [[ ! -x "$venv/bin/python" ]]; then
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
fi
"$venv/bin/pip" install --upgrade pip
"$venv/bin/pip" install "${pins[@]}"
"$venv/bin/python" -c "import torch, torchvision, transformers, safetensors, numpy; \
print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'transformers', \
transformers.__version__, 'safetensors', safetensors.__version__, 'numpy', numpy.__version__)"
echo "venv: $venv (tools/export/torch-python.sh prints its python)"

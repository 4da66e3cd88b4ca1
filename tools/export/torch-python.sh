#!/usr/bin/env bash
# Prints the torch-enabled Python every tool uses (fixtures, goldens, conformance, benchmarks,
# --with-torch tests), in this order:
#   $AOTC_TORCH_PYTHON                       when set;
#   $AOTC_VENV/bin/python                    the venv setup-venv.sh makes (default below);
#   tools/export/.venv/bin/python            the in-repo venv of earlier versions, if present.
# AOTC_VENV defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/aotc/venv-torch-2.15.0: outside the
# repository, so a fresh clone or `git clean` never deletes the several-GB install.
# Usage: py=$(tools/export/torch-python.sh)   (prints the path even when it does not exist yet)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${AOTC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/aotc/venv-torch-2.15.0}"
if [[ -n "${AOTC_TORCH_PYTHON:-}" ]]; then
  echo "$AOTC_TORCH_PYTHON"
elif [[ ! -x "$venv/bin/python" && -x "$here/.venv/bin/python" ]]; then
  echo "$here/.venv/bin/python"
else
  echo "$venv/bin/python"
fi

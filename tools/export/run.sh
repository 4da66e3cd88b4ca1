#!/usr/bin/env bash
# Runs the fixture generators with a torch-enabled Python.
# Python: tools/export/torch-python.sh ($AOTC_TORCH_PYTHON, else the venv of setup-venv.sh).
# Usage: tools/export/run.sh [all|models|fixtures|aot]   (default: all)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="$("$here/torch-python.sh")"
if [[ ! -x "$py" ]]; then
  echo "error: no torch python at '$py'; run tools/export/setup-venv.sh or set AOTC_TORCH_PYTHON" >&2
  exit 1
fi
what="${1:-all}"
case "$what" in
  models)   "$py" "$here/gen_models.py" ;;
  fixtures) "$py" "$here/gen_fixtures.py" ;;
  aot)      "$py" "$here/gen_aot.py" ;;
  all)      "$py" "$here/gen_models.py" && "$py" "$here/gen_fixtures.py" && "$py" "$here/gen_aot.py" ;;
  *) echo "error: unknown target '$what' (all|models|fixtures|aot)" >&2; exit 1 ;;
esac

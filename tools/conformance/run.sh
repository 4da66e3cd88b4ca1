#!/usr/bin/env bash
# Regenerates the op conformance fixtures (docs/conformance.md) with a torch-enabled Python:
# tools/export/torch-python.sh ($AOTC_TORCH_PYTHON, else the setup-venv.sh venv; torch, safetensors, numpy,
# expecttest). Two generator processes share the overloads, then manifest.json is merged.
# Usage: tools/conformance/run.sh [--only aten.add.Tensor,...] [--resume]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="$("$here/../export/torch-python.sh")"
if [[ ! -x "$py" ]]; then
  echo "error: no torch python at '$py'; run tools/export/setup-venv.sh or set AOTC_TORCH_PYTHON" >&2
  exit 1
fi
"$py" -c "import expecttest" 2>/dev/null || "$py" -m pip install expecttest
jobs="${AOTC_CONFORMANCE_JOBS:-2}"
pids=()
for ((i = 0; i < jobs; i++)); do
  "$py" "$here/gen.py" --shard "$i/$jobs" --no-merge "$@" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$py" "$here/gen.py" --merge-only

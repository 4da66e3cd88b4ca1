#!/usr/bin/env bash
# The one-call GPU check of the CUDA target (docs/cuda.md "On a GPU").
#
#   scripts/gpu-check.sh prepare [--rehearse] [--conformance] [--out DIR]  (here: needs aotc built)
#     Compiles, with --target=cuda, the e2e models (mlp, ln_gelu), LN-GELU at N=8192,
#     D=1024, H=4096 (from ln_gelu.fx.txt with the sizes replaced) and the two bandwidth
#     probes into DIR (default build-gpu/, git-ignored), with weights, goldens, --emit=kernels
#     texts and nlohmann/json.hpp; checks every object's PTX (tools: check_ptx.py); prints
#     the total size and fails above 56 MiB. --rehearse then configures and builds the
#     device side from DIR exactly as `device` does (-DAOTC_RUNTIME_ONLY=ON) and runs each
#     phase up to where a GPU is needed (the drivers exit 77 here).
#     --conformance also compiles the first 2 conformance samples of every (op, dtype) for
#     sm_90 into DIR/conformance (tools/gpu/conformance_gpu.py prepare; a few minutes), which
#     `device` then runs on the GPU against torch's references.
#     aotc: $AOTC_BIN, else $AOTC_BUILD_DIR/tools/aotc/aotc (default build/).
#   scripts/gpu-check.sh device                                (there: `run` with carry build-gpu)
#     Versions, build (runtime + drivers only), then every phase under `timeout`: both
#     models vs the CPU goldens (TF32 off), determinism, compute-sanitizer, an
#     out-of-range index, bandwidth probes vs a 1 GiB copy, train-step timings against
#     torch; writes at most 8 files to $OUT and prints one table last even if a phase
#     failed. Never changes clocks or power. Budget: about 5 minutes.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
shift || true
out_dir=$root/build-gpu
rehearse=0
conformance=0
while [ $# -gt 0 ]; do
  case $1 in
    --rehearse) rehearse=1 ;;
    --conformance) conformance=1 ;;
    --out) out_dir=$2; shift ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
limit_mib=56

die() { echo "gpu-check: error: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------
prepare() {
  local aotc=${AOTC_BIN:-${AOTC_BUILD_DIR:-$root/build}/tools/aotc/aotc}
  [ -x "$aotc" ] || die "no aotc at $aotc (build first: scripts/build.sh, or set AOTC_BIN)"
  local tk=${AOTC_CUDA_TOOLKIT:-/usr/local/cuda}
  [ -x "$tk/bin/ptxas" ] || die "no CUDA toolkit at $tk (set AOTC_CUDA_TOOLKIT)"
  set -e
  rm -rf "$out_dir"
  mkdir -p "$out_dir/models" "$out_dir/probes" "$out_dir/include/nlohmann"
  # The whole package: Debian's json.hpp includes <nlohmann/detail/...>, which must not resolve
  # to another version installed on the device (seen: 3.11.3 there, m_data errors).
  cp -r /usr/include/nlohmann/. "$out_dir/include/nlohmann/"
  local flags=(--target=cuda --cuda-toolkit="$tk")
  compile() { # dir name source [flags...]
    local d=$1 n=$2 src=$3
    shift 3
    mkdir -p "$d"
    "$aotc" "$src" "${flags[@]}" --name "$n" -o "$d/$n.o" "$@"
    "$aotc" "$src" "${flags[@]}" --name "$n" --emit=kernels -o "$d/$n.kernels" "$@"
    "$aotc" "$src" "${flags[@]}" --name "$n" --emit=ptx -o "$d/$n.ptx" "$@"
    python3 "$root/test/lit/codegen/Inputs/check_ptx.py" "$d/$n.kernels" "$d/$n.ptx" --name "$n" \
      --ptxas "$tk/bin/ptxas" --arch sm_80 --arch sm_90 --report 3
    rm -f "$d/$n.ptx"
  }
  compile "$out_dir/models/mlp" mlp "$root/examples/mlp/mlp.pt2"
  cp "$root/examples/mlp/golden.safetensors" "$out_dir/models/mlp/"
  compile "$out_dir/models/ln_gelu" ln_gelu "$root/test/e2e/ln_gelu/ln_gelu.pt2"
  cp "$root/test/e2e/ln_gelu/golden.safetensors" "$out_dir/models/ln_gelu/"
  # LN-GELU at N=8192, D=1024, H=4096: the committed FX text with the sizes replaced.
  python3 - "$root/test/e2e/ln_gelu/ln_gelu.fx.txt" "$out_dir/ln_gelu_large.fx.txt" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
sizes = {"32": "8192", "64": "1024", "128": "4096"}
def dims(m):
    return m.group(1) + ", ".join(sizes[d.strip()] for d in m.group(2).split(",")) + m.group(3)
text = re.sub(r'(f32\[)([0-9, ]+)(\])', dims, text)
text = text.replace("[128], p_ln_weight", "[4096], p_ln_weight")
open(sys.argv[2], "w").write(text)
EOF
  # x and y frozen: torch's step (tools/gpu/torch_side.py) computes no gradient for its data.
  compile "$out_dir/models/ln_gelu_large" ln_gelu_large "$out_dir/ln_gelu_large.fx.txt" --freeze x,y
  rm -f "$out_dir/models/ln_gelu_large/ln_gelu_large.weights.safetensors" "$out_dir/ln_gelu_large.fx.txt"
  # Random bits: the CPU target's outputs of tools/gpu/models/random_check.fx.txt (dropout mask,
  # rand_like, bernoulli) travel; the device's must be bit-equal (tools/gpu/random_check.py).
  local rc_dir=$out_dir/models/random_check
  compile "$rc_dir" random_check "$root/tools/gpu/models/random_check.fx.txt"
  python3 "$root/tools/gpu/random_check.py" inputs "$rc_dir/inputs.safetensors"
  "$aotc" run "$root/tools/gpu/models/random_check.fx.txt" --inputs "$rc_dir/inputs.safetensors" \
    --out "$rc_dir/cpu.safetensors"
  compile "$out_dir/probes/probe_chain" probe_chain "$root/tools/gpu/probes/probe_chain.fx.txt" --freeze a,b,c
  compile "$out_dir/probes/probe_ln_gelu" probe_ln_gelu "$root/tools/gpu/probes/probe_ln_gelu.fx.txt" --freeze x,w,b
  rm -f "$out_dir"/probes/*/*.weights.safetensors
  if [ $conformance = 1 ]; then
    python3 "$root/tools/gpu/conformance_gpu.py" prepare --aotc "$aotc" --out "$out_dir/conformance" | tail -n 5
  fi
  set +e
  local bytes
  bytes=$(du -sb "$out_dir" | cut -f1)
  local tree
  tree=$(cd "$root" && git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -n1 | cut -f1)
  printf 'gpu-check prepare: %s: %d files, %.2f MiB (limit %d MiB); working tree %.2f MiB\n' \
    "$out_dir" "$(find "$out_dir" -type f | wc -l)" "$(echo "$bytes / 1048576" | bc -l)" "$limit_mib" \
    "$(echo "$tree / 1048576" | bc -l)"
  [ "$bytes" -le $((limit_mib * 1048576)) ] || die "build-gpu is over $limit_mib MiB"
  [ $((tree + bytes)) -le $((64 * 1048576)) ] ||
    echo "gpu-check prepare: warning: the tree and build-gpu are over the device tool's 64 MiB;" \
      "take test/fixtures, test/conformance/ops, its manifest.json and examples/charlm out of the index" \
      "for the call" \
      "(docs/cuda.md \"Sending the tree to the device machine\")"
  if [ $rehearse = 1 ]; then
    echo "gpu-check prepare --rehearse: building and running the device side up to the GPU"
    # Build and outputs beside DIR, never inside it (DIR is what travels to the device).
    rm -rf "$out_dir.rehearsal"
    AOTC_GPU_CHECK_REHEARSAL=1 AOTC_GPU_BUILD=$out_dir.rehearsal/build OUT=$out_dir.rehearsal/out device_main \
      || die "rehearsal failed (log: $out_dir.rehearsal/out/gpu-check.log)"
    echo "gpu-check prepare --rehearse: ok (every phase built and ran up to the GPU)"
  fi
}

# ---------------------------------------------------------------------------------------
# Device side. Phases append "name|status|detail" rows; the table is printed last.
# $OUT receives gpu-check.log, results.jsonl, table.md and timings.md.
# The table is rewritten after every row, so a run cut short still returns what it measured.
rows=()
row() {
  rows+=("$1|$2|$3")
  write_table
}
deadline=0 # no phase starts after this ($SECONDS); the budget is ~5 minutes
phase() { # name timeout_s command... ; output goes to the log
  local name=$1 t=$2
  shift 2
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "== $name: skipped (time budget spent)" >>"$log"
    return 200
  fi
  local left=$((deadline + 30 - SECONDS)) # no phase runs more than 30 s past the deadline
  [ "$t" -gt "$left" ] && t=$left
  echo "== $name (timeout ${t}s): $*" >>"$log"
  timeout "$t" "$@" >>"$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc" >>"$log"
  return $rc
}
# 77 = the driver found no CUDA device: expected in a rehearsal, a failure on the device.
status_of() {
  case $1 in
    0) echo ok ;;
    77) if [ "${AOTC_GPU_CHECK_REHEARSAL:-0}" = 1 ]; then echo "needs GPU"; else echo "FAILED (no CUDA device)"; fi ;;
    124) echo TIMEOUT ;;
    200) echo "skipped (time)" ;;
    *) echo "FAILED ($1)" ;;
  esac
}

device_main() {
  local rehearsal=${AOTC_GPU_CHECK_REHEARSAL:-0}
  local gpu=$out_dir
  [ -d "$gpu/models" ] || { echo "gpu-check: no $gpu (run prepare here and carry build-gpu)" >&2; return 1; }
  local OUTD=${OUT:-$root/out-gpu}
  mkdir -p "$OUTD"
  log=$OUTD/gpu-check.log
  : >"$log"
  local results=$OUTD/results.jsonl
  : >"$results"
  # $OUT gets three files (log, results, table); run outputs stay beside the build.
  local work=${AOTC_GPU_BUILD:-$gpu/build}.work
  rm -rf "$work"
  mkdir -p "$work"
  local start=$SECONDS
  deadline=$((SECONDS + ${AOTC_GPU_CHECK_BUDGET:-270}))
  # 1. Versions (never changes clocks or power: read-only queries).
  {
    echo "driver: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo none)"
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -n1 || echo none)"
    echo "cmake: $(cmake --version | head -n1)"
    echo "glibc: $(ldd --version | head -n1)"
    echo "torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null || echo none)"
  } | tee -a "$log"
  # 2. Build the runtime and the drivers from the committed sources.
  local bdir=${AOTC_GPU_BUILD:-$gpu/build}
  # The machine's default compilers (the device has no clang-19; the rehearsal uses the same path).
  local tk=${AOTC_CUDA_TOOLKIT:-/usr/local/cuda}
  if phase build 240 bash -c "cmake -S '$root' -B '$bdir' -G Ninja -DCMAKE_BUILD_TYPE=Release -DAOTC_RUNTIME_ONLY=ON \
      -DAOTC_CUDA=ON -DAOTC_CUDA_TOOLKIT='$tk' -DAOTC_GPU_DIR='$gpu' -DAOTC_JSON_INCLUDE='$gpu/include' \
      && cmake --build '$bdir' -j 16"; then
    row build ok "$(ls "$bdir"/tools/gpu | grep -c _cuda_) drivers, cublas: $(ldd "$bdir/tools/gpu/train_cuda_mlp" 2>/dev/null | awk '/libcublas\.so/{print $3}')"
  else
    row build FAILED "see gpu-check.log"
    print_table
    return 1
  fi
  local tg=$bdir/tools/gpu
  # 3. Correctness vs the CPU goldens: step-0 gradients <= 2e-5, losses and params <= 1e-4.
  for m in mlp ln_gelu; do
    local d=$gpu/models/$m r1=$work/$m-run1.safetensors r2=$work/$m-run2.safetensors
    phase "$m train" 60 "$tg/train_cuda_$m" train "$d/$m.weights.safetensors" "$d/golden.safetensors" "$r1"
    local rc=$?
    if [ $rc = 0 ]; then
      phase "$m grads" 30 python3 "$root/tools/check_golden.py" "$r1" "$d/golden.safetensors" --tol 2e-5 --no-loss --no-param-final -v
      local g=$?
      phase "$m loss+params" 30 python3 "$root/tools/check_golden.py" "$r1" "$d/golden.safetensors" --tol 1e-4 -v
      local l=$?
      phase "$m determinism" 60 "$tg/train_cuda_$m" train "$d/$m.weights.safetensors" "$d/golden.safetensors" "$r2"
      local c=$?
      local gs=ok
      [ $g$l = 00 ] || gs=FAILED
      [ $g = 200 ] || [ $l = 200 ] && gs="skipped (time)"
      row "$m vs golden" "$gs" "grads<=2e-5: $(status_of $g), loss/params<=1e-4: $(status_of $l)"
      if [ $c = 0 ]; then
        cmp -s "$r1" "$r2" && row "$m two runs" ok "byte-identical results" || row "$m two runs" FAILED "the two runs' results differ"
      else
        row "$m two runs" "$(status_of $c)" "second run exit $c"
      fi
    else
      row "$m vs golden" "$(status_of $rc)" "train_cuda exit $rc"
    fi
  done
  # 3b. Random bits: dropout mask, rand_like and bernoulli bit-equal to the CPU target's.
  local rcd=$gpu/models/random_check
  phase "random bits" 60 "$tg/train_cuda_random_check" run "$rcd/inputs.safetensors" "$work/random_check.safetensors"
  local rr=$?
  if [ $rr = 0 ]; then
    phase "random bits vs cpu" 60 python3 "$root/tools/gpu/random_check.py" compare "$rcd/cpu.safetensors" "$work/random_check.safetensors"
    local rv=$?
    row "random bits vs CPU" "$(status_of $rv)" "$(grep -E '^(dropout mask|rand_like|bernoulli.p|numpy reference).*differ' "$log" | tr '\n' ';' | cut -c1-200)"
  else
    row "random bits vs CPU" "$(status_of $rr)" "train_cuda run exit $rr"
  fi
  # 3c. The conformance samples prepare --conformance compiled, against torch's references.
  if [ -f "$gpu/conformance/programs.cpp" ]; then
    phase "cuda conformance" 150 python3 "$root/tools/gpu/conformance_gpu.py" device --dir "$gpu/conformance" \
      --driver "$tg/conformance_cuda" --work "$work/conformance" --results "$OUTD/conformance.jsonl" --timeout 60
    local cr=$?
    row "cuda conformance" "$(status_of $cr)" "$(grep '^cuda conformance:' "$log" | tail -n1 | cut -c1-200)"
  fi
  # 4. An out-of-range target: the gather node is named.
  phase "mlp bad index" 30 "$tg/train_cuda_mlp" bad-index "$gpu/models/mlp/mlp.weights.safetensors" "$gpu/models/mlp/golden.safetensors"
  local bi=$?
  row "out-of-range index" "$(status_of $bi)" "$(grep -o 'rc=.*' "$log" | tail -n1 | cut -c1-90)"
  # 5. Bandwidth probes vs a 1 GiB device-to-device copy, checked against torch.
  # Targets (issue 4): the pointwise chain >= 70 % of the copy's bandwidth, layer_norm+gelu >= 60 %.
  for p in probe_chain:0.70 probe_ln_gelu:0.60; do
    local target=${p#*:}
    p=${p%%:*}
    phase "$p" 90 bash -o pipefail -c "'$tg/probe_cuda_$p' 20 '$work/$p.rows.bin' | tee -a '$results'"
    local rc=$?
    if [ $rc = 0 ]; then
      phase "$p vs torch" 90 python3 "$root/tools/gpu/torch_side.py" check-probe "$p" "$work/$p.rows.bin"
      local t=$?
      local verdict
      verdict=$(grep "\"probe\": \"$p\", \"ms\"" "$results" | tail -n1 | python3 -c '
import json, sys
r = json.loads(sys.stdin.read()); t = float(sys.argv[1])
ok = r["fraction_of_copy"] >= t
gbps, frac, copy, ms = r["gbps"], r["fraction_of_copy"], r["copy_gbps"], r["ms"]
print(("ok" if ok else "BELOW TARGET") + "|" +
      f"{gbps} GB/s = {frac * 100:.0f}% of the copy ({copy} GB/s; target {t * 100:.0f}%), {ms} ms")' "$target" 2>/dev/null)
      [ -n "$verdict" ] || verdict="FAILED|no timing line"
      [ $t = 0 ] || verdict="FAILED (vs torch)|${verdict#*|}"
      row "$p" "${verdict%%|*}" "${verdict#*|}"
    else
      row "$p" "$(status_of $rc)" ""
    fi
  done
  # 6. Train-step timings: aotc (plain and CUDA graph) and torch (eager, compile, reduce-overhead).
  for m in mlp ln_gelu ln_gelu_large; do
    local d=$gpu/models/$m
    if [ $m = ln_gelu_large ]; then
      phase "$m aotc bench" 90 bash -o pipefail -c "'$tg/train_cuda_$m' bench - - 20 | tee -a '$results'"
    else
      phase "$m aotc bench" 60 bash -o pipefail -c "'$tg/train_cuda_$m' bench '$d/$m.weights.safetensors' '$d/golden.safetensors' 50 | tee -a '$results'"
    fi
    row "$m aotc step" "$(status_of $?)" "$(grep "\"model\": \"$m\"" "$results" | tail -n1)"
  done
  if [ "$rehearsal" = 1 ]; then
    phase "torch_side.py compiles" 30 python3 -m py_compile "$root/tools/gpu/torch_side.py"
    row "torch steps" "$( [ $? = 0 ] && echo "needs GPU" || echo FAILED)" "tools/gpu/torch_side.py compiles; not run in a rehearsal"
  else
    phase "torch steps" 150 bash -o pipefail -c "python3 '$root/tools/gpu/torch_side.py' steps --budget 90 | tee -a '$results'"
    row "torch steps" "$(status_of $?)" "$(grep -c '"system"' "$results") timings"
  fi
  # 7. compute-sanitizer (last: the slowest checks, skipped first when time runs out) on one step of each model.
  local san
  san=$(command -v compute-sanitizer || ls "$tk/bin/compute-sanitizer" 2>/dev/null)
  for m in mlp ln_gelu; do
    local d=$gpu/models/$m res=""
    for tool in memcheck racecheck initcheck; do
      if [ -z "$san" ]; then res+="$tool unavailable; "; continue; fi
      phase "$m $tool" 60 "$san" --tool "$tool" --error-exitcode 9 "$tg/train_cuda_$m" one-step \
        "$d/$m.weights.safetensors" "$d/golden.safetensors"
      local sr=$?
      # Some sandboxes (gVisor) refuse the sanitizer's device access: that is "unavailable".
      if [ $sr != 0 ] && [ $sr != 200 ] && tail -n 20 "$log" | grep -q "Device not supported"; then
        res+="$tool unavailable (device not supported); "
      else
        res+="$tool $(status_of $sr); "
      fi
    done
    local st=done
    echo "$res" | grep -q "skipped" && st=skipped
    echo "$res" | grep -q -E "FAILED|TIMEOUT" && st=FAILED
    row "$m sanitizer" "$st" "$res"
  done
  row "wall" "done" "$((SECONDS - start)) s"
  timing_table "$results"
  print_table
  # A rehearsal passes when nothing failed ("needs GPU" is expected there).
  ! printf '%s\n' "${rows[@]}" | grep -q -E '\|(FAILED|TIMEOUT)'
}

# The train-step timings of results.jsonl as one table (model x system: median ms, launches).
timing_table() {
  python3 - "$1" >"${OUT:-$root/out-gpu}/timings.md" <<'PY' || true
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
systems = ["eager", "torch.compile", "torch.compile(reduce-overhead)", "aotc", "aotc (CUDA graph)"]
cell = {}
for r in rows:
    if "aotc_ms" in r:
        cell[(r["model"], "aotc")] = f"{r['aotc_ms']:.3f}"
        cell[(r["model"], "aotc (CUDA graph)")] = f"{r['aotc_graph_ms']:.3f} ({r['graph_nodes']} nodes)"
    elif "system" in r:
        v = r.get("ms")
        cell[(r["model"], r["system"])] = (f"{v:.3f}" + (f" ({r['launches']} kernels)" if r.get("launches") else "")
                                           if v is not None else r.get("error", r.get("skipped", "?"))[:40])
print("| model | " + " | ".join(systems) + " |")
print("|---|" + "---|" * len(systems))
for m in ["mlp", "ln_gelu", "ln_gelu_large"]:
    print(f"| {m} | " + " | ".join(cell.get((m, s), "-") for s in systems) + " |")
PY
}

write_table() {
  local t=${OUT:-$root/out-gpu}/table.md
  {
    echo "| phase | status | detail |"
    echo "|---|---|---|"
    for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
  } >"$t"
}
print_table() {
  write_table
  cat "${OUT:-$root/out-gpu}/table.md"
  if [ -s "${OUT:-$root/out-gpu}/timings.md" ]; then
    echo
    echo "Train step, median ms (CUDA events), TF32 off:"
    cat "${OUT:-$root/out-gpu}/timings.md"
  fi
}

case $mode in
  prepare) prepare ;;
  device) device_main ;;
  *) echo "usage: scripts/gpu-check.sh prepare [--rehearse] [--out DIR] | device" >&2; exit 2 ;;
esac

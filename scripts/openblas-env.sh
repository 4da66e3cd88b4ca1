# Sourced by test.sh and bench.sh: $1 is a binary linked with OpenBLAS (build/tools/aotc/aotc).
# Debian 12's OpenBLAS 0.3.21 picks its kernels from the CPUID family and model. On a VM that
# hides the model ("Intel(R) Xeon(R) Processor"), it falls back to its Prescott (SSE3) kernels,
# whatever the CPU supports. Measured on such a machine (2026-12-07, AVX-512 CPU):
# optim.mlp_adamw_clip's final parameters 4.9e-3 from the float64 reference with Prescott
# kernels, 3.6e-5 to 1.3e-4 with Haswell, SkylakeX, Sandybridge or Nehalem, and torch's own
# float32 spread 3.5e-5 to 1.1e-4. So when OpenBLAS reports Prescott on a CPU with AVX2 or
# AVX-512F, the tests and benchmarks run with the kernels OpenBLAS gives that CPU when it knows
# it (OPENBLAS_CORETYPE, read by OpenBLAS when it loads). A value already set is kept.
# docs/testing.md "OpenBLAS kernels".
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x "${1:-}" ]; then
  _core=$(OPENBLAS_VERBOSE=2 "$1" --version 2>&1 | sed -n 's/^Core: //p' | head -n 1)
  if [ "$_core" = Prescott ]; then
    if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
    [ -n "${OPENBLAS_CORETYPE:-}" ] &&
      echo "note: OpenBLAS did not recognise this CPU (Prescott kernels); OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (scripts/openblas-env.sh)" >&2
  fi
  unset _core
fi

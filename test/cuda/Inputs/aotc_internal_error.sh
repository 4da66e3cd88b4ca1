#!/bin/sh
# A stand-in for aotc that fails as an internal error does (exit 2): the negative control of
# cuda.conformance_audit (tools/gpu/conformance_gpu.py audit must fail on it).
echo "aotc: internal error: planted by test/cuda/Inputs/aotc_internal_error.sh" >&2
exit 2

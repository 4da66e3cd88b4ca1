#!/usr/bin/env bash
# Data-parallel checks (docs/distributed.md, test/e2e/dp/CMakeLists.txt). mpirun as this
# machine allows (root, loopback, shared memory), each run under `timeout`, one OpenMP thread
# per rank (2 cores).
#   run_dp.sh bitwise DRIVER WEIGHTS FIXTURE DIR NP STEPS TOL [MIN_OVERLAP [MICRO]]
#       reference (one process, NP x MICRO shards accumulated) vs NP ranks of MICRO micro-
#       batches each (default 1); TOL 0: bit-identical
#   run_dp.sh against REFDRIVER REFWEIGHTS DRIVER WEIGHTS FIXTURE DIR NP STEPS TOL
#       the same with the reference run by another object of the model (ZeRO-1's: plain)
#   run_dp.sh mpmd DIR 'A ARGS' 'B ARGS'   rank 0 runs A, rank 1 runs B (expected to fail)
#   run_dp.sh np NP DRIVER ARGS...        NP ranks of DRIVER ARGS (its exit status)
set -uo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mpi=(mpirun --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo --mca btl_vader_single_copy_mechanism none)
limit=${AOTC_DP_TIMEOUT:-120}
# The communicator's wait deadline, when the test sets one, reaches every rank.
[ -n "${AOTC_COMM_TIMEOUT:-}" ] && mpi+=(-x AOTC_COMM_TIMEOUT)
mode=$1; shift
case "$mode" in
  bitwise)
    driver=$1 weights=$2 fixture=$3 dir=$4 np=$5 steps=$6 tol=$7 overlap=${8:-} micro=${9:-1}
    mkdir -p "$dir"
    timeout "$limit" "$driver" ref "$weights" "$fixture" $((np * micro)) "$steps" "$dir/ref.safetensors" || exit 1
    timeout "$limit" "${mpi[@]}" -np "$np" "$driver" dp "$weights" "$fixture" "$steps" "$dir/dp.safetensors" \
      "micro=$micro" || exit 1
    "$driver" compare "$dir/dp.safetensors" "$dir/ref.safetensors" "$tol" || exit 1
    if [ -n "$overlap" ]; then "$driver" overlap-check "$dir/dp.safetensors" "$overlap" || exit 1; fi
    ;;
  against)
    # run_dp.sh against REFDRIVER REFWEIGHTS DRIVER WEIGHTS FIXTURE DIR NP STEPS TOL: as bitwise,
    # the reference from another object of the same model (ZeRO-1 against plain data parallel's).
    ref=$1 refweights=$2 driver=$3 weights=$4 fixture=$5 dir=$6 np=$7 steps=$8 tol=$9
    mkdir -p "$dir"
    timeout "$limit" "$ref" ref "$refweights" "$fixture" "$np" "$steps" "$dir/ref.safetensors" || exit 1
    timeout "$limit" "${mpi[@]}" -np "$np" "$driver" dp "$weights" "$fixture" "$steps" "$dir/dp.safetensors" || exit 1
    "$driver" compare "$dir/dp.safetensors" "$dir/ref.safetensors" "$tol" || exit 1
    ;;
  mpmd)
    dir=$1 a=$2 b=$3
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    timeout "$limit" "${mpi[@]}" -np 1 $a : -np 1 $b
    ;;
  np)
    np=$1; shift
    timeout "$limit" "${mpi[@]}" -np "$np" "$@"
    ;;
  *) echo "run_dp.sh: unknown mode $mode" >&2; exit 2 ;;
esac

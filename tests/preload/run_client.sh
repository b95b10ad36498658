#!/usr/bin/env bash
# Runs an unmodified MPI client under libdct_mpi_preload.so and checks what
# the shim did (ctest: preload.*). Usage:
#   run_client.sh plain  NP MPIEXEC SHIM plain_allreduce
#   run_client.sh mpi4py NP MPIEXEC SHIM mpi4py_client.py preload_reference PYTHON3
#   run_client.sh mismatch NP MPIEXEC SHIM mpi4py_client.py PYTHON3
set -euo pipefail
mode=$1 np=$2 mpiexec=$3 shim=$4 client=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun() { "$mpiexec" --oversubscribe -np "$np" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

# Every rank logged one summary line with `want` compressed calls, none
# fallen back.
check_summary() {
  local want=$1 lines
  lines=$(grep "preload summary" "$work/err" || true)
  echo "$lines"
  [ "$(grep -c . <<<"$lines")" -eq "$np" ] || fail "expected $np summary lines"
  grep -vq " $want compressed, 0 fell back" <<<"$lines" && fail "expected $want compressed calls per rank"
  return 0
}

case $mode in
plain)
  # Dense, then under the shim switched off, then compressing (5% density:
  # on this problem every coordinate matters equally, see README).
  args=(262144 300 0.03)
  dense=$(mpirun "$client" "${args[@]}")
  off=$(mpirun -x LD_PRELOAD="$shim" "$client" "${args[@]}")
  on=$(mpirun -x LD_PRELOAD="$shim" -x DCT_MPI_COMPRESS=1 -x DCT_DENSITY=0.05 -x DCT_DEBUG=INFO \
       "$client" "${args[@]}" 2>"$work/err")
  printf 'dense:      %s\nshim off:   %s\ncompressed: %s\n' "$dense" "$off" "$on"
  [ "$off" = "$dense" ] || fail "the shim without DCT_MPI_COMPRESS=1 changed the result"
  check_summary 300
  gap() { sed -n 's/.*relative gap \([^ ]*\).*/\1/p' <<<"$1"; }
  awk -v d="$(gap "$dense")" -v c="$(gap "$on")" 'BEGIN { exit !(d < 1e-3 && c < 0.05) }' ||
    fail "did not converge (dense gap must be < 1e-3, compressed < 0.05)"
  ;;
mpi4py)
  reference=$6 python=${7:-python3} steps=4
  # Fixed algorithm: auto's choice also weighs measured times, which differ
  # between the two runs.
  mpirun -x LD_PRELOAD="$shim" -x DCT_MPI_COMPRESS=1 -x DCT_DEBUG=INFO -x DCT_ALGORITHM=allgather \
    "$python" "$client" "$work" "$steps" 2>"$work/err" || { cat "$work/err"; fail "client failed"; }
  check_summary $((2 * steps))
  mpirun -x DCT_ALGORITHM=allgather "$reference" "$work" "$steps"
  ;;
mismatch)
  # One rank's settings differ from the others': every rank must pass its
  # calls through alike (one WARN line), never hang, and hold the same sums.
  python=${6:-python3} steps=2
  [ "$np" -ge 2 ] || { echo "PASS (one rank: nothing to differ)"; exit 0; }
  for setting in DCT_DENSITY=0.05 DCT_PRELOAD_MIN_BYTES=8M DCT_WIRE_TYPE=fp16; do
    rm -f "$work"/*.out.* "$work"/err
    common=(-x LD_PRELOAD="$shim" -x DCT_MPI_COMPRESS=1 -x DCT_DEBUG=WARN -x DCT_ALGORITHM=allgather)
    timeout 300 "$mpiexec" --oversubscribe "${common[@]}" -np 1 -x "$setting" "$python" "$client" "$work" "$steps" \
      : "${common[@]}" -np $((np - 1)) "$python" "$client" "$work" "$steps" 2>"$work/err" ||
      { cat "$work/err"; fail "$setting on rank 0 only: the client failed or hung"; }
    grep -q "every rank passes its calls through" "$work/err" || { cat "$work/err"; fail "$setting: no WARN line"; }
    for f in "$work"/f32.out.0.* "$work"/f64.out.0.*; do
      for r in $(seq 1 $((np - 1))); do
        cmp -s "$f" "${f/.out.0./.out.$r.}" || fail "$setting: rank $r's result differs from rank 0's ($f)"
      done
    done
    echo "$setting on rank 0 only: every rank passed through, identical results"
  done
  ;;
*) fail "unknown mode $mode" ;;
esac
echo PASS

#!/usr/bin/env bash
# Row sharding with an exact exchange computes the same model as table
# sharding (the same initial rows, pooled sums and updates, only summed in a
# different place): trains both with the same seed and flags and fails
# unless their final held-out AUCs differ by less than TOL.
#
#   compare_sharding.sh MPIEXEC NP BIN TOL ROW_MODE [flags for both runs...]
#
# The table run uses --mode dense (MPI_Alltoallv); the row run ROW_MODE
# (dense: MPI_Alltoallv + sum; mp: DES).
set -euo pipefail
[ $# -ge 5 ] || { echo "usage: $0 MPIEXEC NP BIN TOL ROW_MODE [flags...]" >&2; exit 2; }
MPIEXEC="$1" NP="$2" BIN="$3" TOL="$4" ROW_MODE="$5"
shift 5
auc() {  # final held-out AUC of one run; the run's own checks must pass
  local out
  out=$("$MPIEXEC" --oversubscribe --allow-run-as-root -np "$NP" "$BIN" "$@" < /dev/null) ||
    { echo "$out" >&2; echo "FAIL: $BIN $* exited nonzero" >&2; exit 1; }
  echo "$out" | grep '^RESULT' | tail -1 | tr ' ' '\n' | sed -n 's/^auc=//p'
}
table=$(auc --mode dense --sharding table --tag table "$@")
row=$(auc --mode "$ROW_MODE" --sharding row --tag row "$@")
[ -n "$table" ] && [ -n "$row" ] || { echo "FAIL: no RESULT line (table '$table', row '$row')" >&2; exit 1; }
awk -v t="$table" -v r="$row" -v tol="$TOL" -v mode="$ROW_MODE" 'BEGIN {
  d = r - t; ad = d < 0 ? -d : d
  printf "held-out AUC: table (dense all-to-all) %s, row (%s) %s, difference %+.6f\n", t, mode, r, d
  if (ad < tol) { printf "PASS: |difference| < %s\n", tol; exit 0 }
  printf "FAIL: |difference| >= %s\n", tol; exit 1 }'

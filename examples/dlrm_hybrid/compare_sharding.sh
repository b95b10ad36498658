#!/usr/bin/env bash
# Row sharding with an exact exchange computes the same model as table
# sharding (the same initial rows, pooled sums and updates, only summed in a
# different place). Trains three runs with the same seed and flags: table
# sharding with the dense all-to-all, row sharding with the dense
# reduce-scatter and with DES. Fails unless the DES run's final held-out
# AUC is within TOL of the table run's, and the two row runs end with
# bit-identical MLP weights (the same FNV-1a hash).
#
#   compare_sharding.sh MPIEXEC NP BIN TOL [flags for every run...]
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 MPIEXEC NP BIN TOL [flags...]" >&2; exit 2; }
MPIEXEC="$1" NP="$2" BIN="$3" TOL="$4"
shift 4
last() {  # "auc hash" of a run's last RESULT line; the run's own checks must pass
  local out
  out=$("$MPIEXEC" --oversubscribe --allow-run-as-root -np "$NP" "$BIN" "$@" < /dev/null) ||
    { echo "$out" >&2; echo "FAIL: $BIN $* exited nonzero" >&2; exit 1; }
  echo "$out" | grep '^RESULT' | tail -1 | tr ' ' '\n' |
    awk -F= '$1 == "auc" { a = $2 } $1 == "mlp_hash" { h = $2 } END { if (a != "" && h != "") print a, h }'
}
table=$(last --mode dense --sharding table --tag table "$@")
rowDense=$(last --mode dense --sharding row --tag row-dense "$@")
rowDes=$(last --mode mp --sharding row --tag row-des "$@")
awk -v t="$table" -v rd="$rowDense" -v rs="$rowDes" -v tol="$TOL" 'BEGIN {
  if (split(t, T, " ") != 2 || split(rd, D, " ") != 2 || split(rs, S, " ") != 2) {
    print "FAIL: a run printed no RESULT line with auc and mlp_hash"; exit 1 }
  printf "held-out AUC / MLP hash: table (dense all-to-all) %s %s, row dense %s %s, row DES %s %s\n",
         T[1], T[2], D[1], D[2], S[1], S[2]
  d = S[1] - T[1]; ad = d < 0 ? -d : d; ok = 1
  if (ad >= tol) { printf "FAIL: |AUC(row DES) - AUC(table)| = %.6f >= %s\n", ad, tol; ok = 0 }
  if (D[2] != S[2]) { print "FAIL: row dense and row DES MLP weights differ"; ok = 0 }
  if (!ok) exit 1
  printf "PASS: |AUC(row DES) - AUC(table)| = %.6f < %s; row dense and DES bit-identical%s\n", ad, tol,
         T[2] == S[2] ? " (and equal to table)" : "" }'

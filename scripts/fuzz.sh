#!/usr/bin/env bash
# Longer adversarial-peer runs than CI's (tests/mpi/test_adversarial_peer.cc):
# builds the ASan+UBSan preset's fuzz test, then runs batches of seeds at 1-4
# ranks until a batch breaks the contract (prints the failing seed and exits
# 1) or the rounds run out.
#   scripts/fuzz.sh [rounds=20] [cases per batch=2000] [first seed=100000]
# Reproduce one seed: DCT_FUZZ_SEED=<seed> DCT_FUZZ_CASES=1 DCT_FUZZ_VERBOSE=1 \
#   mpirun -np <ranks> build-asan/tests/test_adversarial_peer
set -euo pipefail
source "$(dirname "$0")/setup.sh"
rounds=${1:-20}
cases=${2:-2000}
seed=${3:-100000}
cd "$DCT_ROOT"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$(nproc)" --target test_adversarial_peer
bin=build-asan/tests/test_adversarial_peer
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for ((round = 0; round < rounds; round++)); do
  for np in 1 2 3 4; do
    log=$(mktemp)
    echo "seeds $seed..$((seed + cases - 1)) at $np ranks"
    if ! DCT_FUZZ_SEED=$seed DCT_FUZZ_CASES=$cases DCT_FUZZ_VERBOSE=1 \
         timeout 3600 mpirun --oversubscribe --allow-run-as-root -np "$np" "$bin" -tc='an adversarial*' >"$log" 2>&1; then
      grep -E "FUZZ (FAIL|HANG)" "$log" || true
      # The last case rank 0 began is the culprit of a crash or sanitizer report.
      echo "failing batch: DCT_FUZZ_SEED=$seed DCT_FUZZ_CASES=$cases at $np ranks; last cases:"
      grep -E "^seed [0-9]+" "$log" | tail -n 1 || true
      grep -m1 -E "ERROR: AddressSanitizer|runtime error" "$log" || true
      echo "full log: $log"
      exit 1
    fi
    rm -f "$log"
  done
  seed=$((seed + cases))
done
echo "no contract broken in $rounds rounds of $cases cases at 1-4 ranks"

#!/usr/bin/env bash
# Main job: 4-rank mpirun demo, dense MPI_Allreduce vs libdct sparse allreduce.
# Extra arguments go to the demo (-n count, -s steps, -D density).
set -euo pipefail
source "$(dirname "$0")/setup.sh"
dct_install_packages
dct_build default
cd "$DCT_ROOT"
mpirun -np 4 --oversubscribe build/examples/allreduce_demo "$@"

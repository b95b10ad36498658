#!/bin/bash
# Device run for issue 39: global top-k and split on the CUDA twin (1-rank NCCL, staged MPI at 2 and 4 ranks), absSum.
set -u
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log39.txt") 2>&1
T0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }
stamp env; nvidia-smi -L
mkdir -p /tmp/g && tar -C /tmp/g -xJf "$G/bin39.tar.xz"
if ! command -v orterun >/dev/null; then
  mkdir -p /tmp/mpiroot
  for d in "$G"/debs/*.deb; do dpkg -x "$d" /tmp/mpiroot; done
  cp -rn /tmp/mpiroot/usr/* /usr/ ; cp -rn /tmp/mpiroot/etc/* /etc/ 2>/dev/null
  ldconfig
fi
NCCLDIR=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])")/lib
export LD_LIBRARY_PATH=$NCCLDIR:/tmp/g/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
B=/tmp/g/bin
for t in test_cuda_ops test_cuda_compressor test_cuda_select test_cuda_threshold test_device_collectives; do
  start=$(date +%s%N); timeout 150 $B/$t >/tmp/$t.log 2>&1; rc=$?
  printf '%-26s rc=%-3s %6sms  %s\n' $t $rc "$(( ($(date +%s%N) - start) / 1000000 ))" "$(grep -E '^\[doctest\] (test cases|assertions)' /tmp/$t.log | tr '\n' ' ')"
  { echo "##### $t rc=$rc"; if [ $rc = 0 ]; then tail -6 /tmp/$t.log; else head -c 40000 /tmp/$t.log; fi; } >> "$OUT/tests39.log"
done
for np in 2 4; do
  timeout 100 orterun --oversubscribe --bind-to none -np $np $B/test_device_multirank >/tmp/mr$np.log 2>&1; rc=$?
  echo "test_device_multirank np$np rc=$rc"; tail -3 /tmp/mr$np.log
  { echo "##### multirank np$np rc=$rc"; head -c 30000 /tmp/mr$np.log; } >> "$OUT/tests39.log"
done
stamp done

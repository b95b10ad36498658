#!/bin/bash
# Device run from the repo root: pending checks of bench/README.md.
set -u
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }
stamp env
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
nproc
stamp unpack
mkdir -p /tmp/g && tar -C /tmp/g -xJf "$G/bin.tar.xz"
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
MPIRUN="orterun --oversubscribe --bind-to none"
runtest() {
  n=$(basename "$1"); start=$(date +%s%N)
  timeout 150 "$1" >"/tmp/$n.log" 2>&1; rc=$?
  printf '%-26s rc=%-3s %6sms  %s\n' "$n" "$rc" "$(( ($(date +%s%N) - start) / 1000000 ))" \
    "$(grep -E '^\[doctest\] (test cases|assertions)' "/tmp/$n.log" | tr '\n' ' ')"
  { echo "##### $n rc=$rc"; if [ $rc = 0 ]; then tail -6 "/tmp/$n.log"; else head -c 40000 "/tmp/$n.log"; fi; } >"$OUT/t_$n.log"
}
export -f runtest; export OUT
steps=${*:-"select tests multirank kernels hook"}
for s in $steps; do
  stamp "$s"
  case $s in
  select) runtest $B/test_cuda_select ;;
  tests) ls $B/test_cuda_* $B/test_device_collectives $B/test_nccl_comm_init | grep -v test_cuda_select | xargs -P 5 -I{} bash -c 'runtest {}'
         cat "$OUT"/t_*.log > "$OUT/tests.log"; rm -f "$OUT"/t_*.log ;;
  multirank) for np in 2 4; do
      timeout 100 $MPIRUN -np $np $B/test_device_multirank >"/tmp/mr$np.log" 2>&1; rc=$?
      echo "test_device_multirank np$np rc=$rc"; tail -4 "/tmp/mr$np.log"
      { echo "##### multirank np$np rc=$rc"; head -c 30000 "/tmp/mr$np.log"; } >>"$OUT/tests.log"
    done ;;
  kernels) timeout 120 $B/cuda_kernel_perf -b 1M -e 256M -f 4 -n 10 2>&1 | tee "$OUT/kernel.txt" ;;
  hook) RANK=0 WORLD_SIZE=1 LIBDCT_LIBRARY=/tmp/g/lib/libdct.so PYTHONPATH=python timeout 150 python3 tests/python/gpu_hook_check.py 2>&1 | tee "$OUT/hook.txt" | tail -30 ;;
  esac
done
stamp done

#!/bin/bash
# The checks that need a GPU, on a lent machine, from the repository root,
# over what bench/device/pack.sh put in .gpu/. Steps (default: all):
#   tests      every CUDA suite (test_cuda_*, test_nccl_*, test_device_collectives)
#   components no_mpi_process: libdct.so with its components hidden or absent
#   multirank  test_device_multirank at 2-4 ranks (staged MPI; NCCL needs a GPU per rank)
#   step       cuda_step_perf: a whole step at 1-rank NCCL, variable vs fixed capacity (allgather and
#              global top-k plans), and 1-bit
#   kernels    cuda_kernel_perf: select, pack, thresholds vs the D2D copy
#   rows       cuda_kernel_perf -R at D = 64 and 256 (ROW_LENGTHS)
#   hook       tests/python/gpu_hook_check.py (torch, 1 rank, NCCL and gloo)
#   overlap    bench/hook_overlap.py on NCCL, variable and fixed capacity, stream priorities, GIL interval
#   trace      its torch.profiler timeline of a few steps (trace.json)
# Output goes to $OUT (log.txt, tests.log, one .txt per bench step).
set -u
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }
stamp "env at $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; nproc
mkdir -p /tmp/g && tar -C /tmp/g -xJf "$G/bin.tar.xz"
if ! command -v orterun >/dev/null; then
  mkdir -p /tmp/mpiroot
  for d in "$G"/debs/*.deb; do dpkg -x "$d" /tmp/mpiroot; done
  cp -rn /tmp/mpiroot/usr/* /usr/; cp -rn /tmp/mpiroot/etc/* /etc/ 2>/dev/null; ldconfig
fi
NCCLDIR=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])")/lib
export LD_LIBRARY_PATH=$NCCLDIR:/tmp/g/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export OMPI_MCA_mca_base_component_show_load_errors=0 PYTHONUNBUFFERED=1 OUT
B=/tmp/g/bin
runtest() {
  n=$(basename "$1"); start=$(date +%s%N)
  timeout 200 "$1" >"/tmp/$n.log" 2>&1; rc=$?
  printf '%-28s rc=%-3s %6sms  %s\n' "$n" "$rc" "$(( ($(date +%s%N) - start) / 1000000 ))" \
    "$(grep -E '^\[doctest\] (test cases|assertions)' "/tmp/$n.log" | tr '\n' ' ')"
  { echo "##### $n rc=$rc"; if [ $rc = 0 ]; then tail -4 "/tmp/$n.log"; else head -c 30000 "/tmp/$n.log"; fi; } >"$OUT/t_$n.log"
}
export -f runtest
pyenv() { env RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=${PORT:-29511} \
  LIBDCT_LIBRARY=/tmp/g/lib/libdct.so PYTHONPATH=python "$@"; }
for s in ${*:-tests components multirank step kernels rows hook overlap}; do
  stamp "$s"
  case $s in
  tests) ls $B/test_cuda_* $B/test_nccl_* $B/test_device_collectives | grep -v test_nccl_comm_init |
           xargs -P 4 -I{} bash -c 'runtest {}'
         cat "$OUT"/t_*.log >"$OUT/tests.log"; rm -f "$OUT"/t_*.log ;;
  components) mkdir -p /tmp/none && DCT_COMPONENT_DIR=/tmp/none runtest $B/test_missing_component
              cat "$OUT"/t_test_missing_component.log; mv "$OUT"/t_test_missing_component.log "$OUT/components_test.log"
              timeout 120 bash tests/package/hidden_libs.sh $B/no_mpi_process /tmp/g/lib 2>&1 | tail -6 |
                tee "$OUT/components.txt" ;;
  multirank) for np in 2 3 4; do
      timeout 200 orterun --oversubscribe --bind-to none -np $np $B/test_device_multirank >/tmp/mr.log 2>&1
      rc=$?; echo "test_device_multirank np$np rc=$rc"; tail -3 /tmp/mr.log
      { echo "##### multirank np$np rc=$rc"; head -c 30000 /tmp/mr.log; } >>"$OUT/tests.log"
    done ;;
  step) { for c in 1.25 2; do timeout 120 $B/cuda_step_perf -b 1M -e 16M -c $c -n 20; done
          timeout 120 $B/cuda_step_perf -b 1M -e 16M -a globaltopk -c 1.25 -n 20
          timeout 120 $B/cuda_step_perf -b 1M -e 16M -1 -n 20; } | tee "$OUT/step.txt" ;;
  kernels) timeout 120 $B/cuda_kernel_perf -b 1M -e 64M -f 4 -n 10 | tee "$OUT/kernel.txt" ;;
  rows) for L in ${ROW_LENGTHS:-64 256}; do timeout 60 $B/cuda_kernel_perf -R -L $L -b 16M -e 64M -n 10; done | tee "$OUT/rows.txt" ;;
  hook) pyenv timeout 200 python3 tests/python/gpu_hook_check.py 2>&1 | tail -20 | tee "$OUT/hook.txt"
        PORT=29512 DCT_CAPACITY_FACTOR=1.25 pyenv timeout 200 python3 tests/python/gpu_hook_check.py 2>&1 |
          tail -8 | tee -a "$OUT/hook.txt" ;;
  overlap) port=29520  # variable and fixed capacity, the hook's stream at normal and high priority, a short GIL interval
    for run in "0 0" "0 -1" "1.25 0" "1.25 -1" "1.25 -1 --switch-interval 0.0002"; do
      set -- $run; port=$((port + 1))
      PORT=$port DCT_CAPACITY_FACTOR=$1 pyenv timeout 100 python3 bench/hook_overlap.py --backend nccl --steps 10 \
        --repeats 5 --stream-priority $2 ${@:3} --out "$OUT/overlap_c$1_p$2${3:+_gil}.json" 2>&1 | tail -3
    done | tee "$OUT/overlap.txt" ;;
  trace) PORT=29530 pyenv timeout 200 python3 bench/hook_overlap.py --backend nccl --steps 5 --repeats 1 \
           --trace "$OUT/trace.json" 2>&1 | tail -5 ;;
  esac
done
stamp done

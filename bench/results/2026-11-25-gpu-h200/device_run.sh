#!/bin/bash
# Device-machine run, from the repo root: CUDA twin tests, kernel benchmarks,
# the NCCL shim under PyTorch, and dct_perf on the host CPU. Each step is
# bounded by timeout so the whole run ends well inside 10 minutes.
# Usage: bash .gpu/run.sh [steps...]   (default: all)
set -u
G=$PWD/.gpu
R=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }

stamp env
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
head -2 /etc/os-release; nproc; free -g | head -2

stamp unpack
mkdir -p /tmp/g && tar -C /tmp/g -xJf "$G/bin.tar.xz" || python3 -c "import tarfile;tarfile.open('$G/bin.tar.xz').extractall('/tmp/g')"
if ! command -v orterun >/dev/null; then
  mkdir -p /tmp/mpiroot
  for d in "$G"/debs/*.deb; do dpkg -x "$d" /tmp/mpiroot; done
  cp -rn /tmp/mpiroot/usr/* /usr/ && cp -rn /tmp/mpiroot/etc/* /etc/ 2>/dev/null
  ldconfig
fi
command -v orterun; orterun --version | head -1
NCCLDIR=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])")/lib
ls "$NCCLDIR"
export LD_LIBRARY_PATH=$NCCLDIR:/tmp/g/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
B=/tmp/g/bin
MPIRUN="orterun --oversubscribe --bind-to none"

steps=${*:-"tests multirank kernels torch shim perf"}
for s in $steps; do
  case $s in
  tests)
    for t in $B/test_cuda_* $B/test_device_collectives; do
      n=$(basename "$t")
      start=$(date +%s%N)
      timeout 120 "$t" >"/tmp/$n.log" 2>&1; rc=$?
      printf '%-26s rc=%-3s %6sms  %s\n' "$n" "$rc" "$(( ($(date +%s%N) - start) / 1000000 ))" \
        "$(grep -E '^\[doctest\] (test cases|assertions)' "/tmp/$n.log" | tr '\n' ' ')"
      { echo "##### $n rc=$rc"; if [ $rc = 0 ]; then tail -4 "/tmp/$n.log"; else head -c 60000 "/tmp/$n.log"; fi; } >>"$OUT/tests.log"
    done ;;
  multirank)
    for np in 2 4; do
      stamp "test_device_multirank np $np"
      timeout 150 $MPIRUN -np $np $B/test_device_multirank >"/tmp/mr$np.log" 2>&1; rc=$?
      echo "test_device_multirank np$np rc=$rc"; tail -5 "/tmp/mr$np.log"
      { echo "##### multirank np$np rc=$rc"; head -c 60000 "/tmp/mr$np.log"; } >>"$OUT/tests.log"
    done ;;
  kernels)
    stamp cuda_kernel_perf
    timeout 120 $B/cuda_kernel_perf -b 1M -e 256M -f 4 -n 10 2>&1 | tee "$OUT/kernel.txt"
    ;;
  thresholds)
    timeout 90 $B/cuda_kernel_perf -T 2>&1 | tee -a "$OUT/kernel.txt"
    stamp torch_topk
    timeout 60 python3 bench/kernel/torch_topk.py 0.01 20 28 2>&1 | tee -a "$OUT/kernel.txt"
    stamp "kernel_perf (CPU twin, $(nproc) cores)"
    timeout 120 $B/kernel_perf -b 1M -e 256M -f 4 -n 5 2>&1 | tee -a "$OUT/kernel.txt" ;;
  torch|shim)
    stamp "torch_ddp $s"
    if [ $s = torch ]; then pre="DCT_PRELOAD=0"; else pre="DCT_PRELOAD=1"; fi
    timeout 120 env $pre LD_PRELOAD=/tmp/g/lib/libdct_nccl_preload.so DCT_DEBUG=INFO \
      python3 examples/preload/torch_ddp.py --steps 200 2>&1 | tee -a "$OUT/torch.txt" | tail -25 ;;
  prof)
    stamp "ncu per-kernel GPU time, select/pack/scatter/tau at 64M"
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    timeout 200 $NCU --clock-control none --print-summary per-kernel --metrics gpu__time_duration.sum,dram__bytes.sum \
      $B/cuda_kernel_perf -b 64M -e 64M -n 3 2>&1 | tee "$OUT/prof.txt" | grep -E "^ +[a-zA-Z_]|gpu__time|dram__bytes|Section|select|pack" | head -150 ;;
  variants)
    mkdir -p /tmp/v && tar -C /tmp/v -xJf "$G/variants.tar.xz"
    for r in 1 2; do for v in capped transpose vector; do
      stamp "variant $v round $r"
      timeout 60 /tmp/v/ckp_$v -b 16M -e 256M -f 4 -n 10 2>&1 | grep -E " select|memcpy" | tee -a "$OUT/variants.txt"
    done; done
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    for v in capped transpose vector; do
      stamp "ncu $v"
      timeout 60 $NCU --clock-control none --print-summary per-kernel --metrics gpu__time_duration.sum -k regex:"compact|accumulateCount|DeviceSelect|finish|addKernel" \
        /tmp/v/ckp_$v -b 64M -e 64M -n 3 2>&1 | grep -E "^  void|gpu__time" | sed 's/(T1.*//' | tee -a "$OUT/variants.txt"
    done ;;
  perf)
    for np in 2 4; do
      stamp "dct_perf np $np (host CPU)"
      timeout 100 $MPIRUN -np $np -x GLIBC_TUNABLES $B/dct_perf -p -b 256K -e 64M -f 4 -D 0.01 -n 7 -w 10 \
        2>&1 | tee -a "$OUT/perf.txt"
    done ;;
  esac
done
stamp done

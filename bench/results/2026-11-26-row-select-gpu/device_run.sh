#!/bin/bash
# Device run for issue 38's baseline: the CUDA twin's row kernels, and the CPU twin's on the same host.
set -u
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/rows38.txt") 2>&1
nvidia-smi -L; nproc
mkdir -p /tmp/g && tar -C /tmp/g -xJf "$G/bin38.tar.xz"
if ! ldconfig -p | grep -q libhwloc.so.15; then
  mkdir -p /tmp/hw && for d in "$G"/debs/libhwloc15*.deb "$G"/debs/libxnvctrl0*.deb; do dpkg -x "$d" /tmp/hw; done
  export LD_LIBRARY_PATH=/tmp/hw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
export LD_LIBRARY_PATH=/tmp/g/lib:${LD_LIBRARY_PATH:-}
B=/tmp/g/bin
for L in 64 256; do
  timeout 120 $B/cuda_kernel_perf -R -L $L -K 0.05 -b 1M -e 64M -f 4 -n 10
done
for L in 64 256; do
  for t in 1 16; do
    DCT_NUM_THREADS=$t timeout 120 $B/kernel_perf -b 16M -e 16M -L $L -K 0.05 -n 5 2>&1 | grep -E "row|memcpy|^# kernel_perf"
  done
done

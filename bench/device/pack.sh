#!/bin/bash
# Packs what bench/device/run.sh needs into .gpu/ (git-ignored; carry it):
# the CUDA build's test and bench binaries and libraries, stripped, and
# Debian's Open MPI packages (the lent machine has no MPI).
# Usage: bench/device/pack.sh [build-dir]   (a CUDA build: DCT_ENABLE_CUDA=ON)
# PACK_TESTS='test_cuda_rows*' packs only the suites matching that name.
set -eu
B=${1:-build}
G=.gpu
rm -rf "$G/stage" && mkdir -p "$G/stage/bin" "$G/stage/lib" "$G/debs"
cp -a "$B"/src/libdct*.so* "$G/stage/lib/"
find "$B/tests/cuda" -maxdepth 1 -type f -executable -name "${PACK_TESTS:-test_*}" -exec cp {} "$G/stage/bin/" \;
for t in bench/cuda_kernel_perf bench/cuda_step_perf bench/dct_perf bench/kernel_perf tests/no_mpi_process; do
  [ -x "$B/$t" ] && cp "$B/$t" "$G/stage/bin/"
done
strip --strip-unneeded "$G"/stage/bin/* "$G"/stage/lib/*.so.*.* "$G"/stage/lib/libdct_*.so
# One large dictionary: every binary carries the same device code.
XZ_OPT="-6 --lzma2=dict=256MiB" tar -C "$G/stage" -cJf "$G/bin.tar.xz" bin lib
rm -rf "$G/stage"
# Open MPI 4.1 and what its components load, from the distribution's archive.
(cd "$G/debs" && [ -n "$(ls)" ] || apt-get download openmpi-bin libopenmpi3 openmpi-common libpmix2 \
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libhwloc15 libibverbs1 libmunge2 libnl-route-3-200 \
  libnl-3-200 libnuma1 libpsm-infinipath1 libpsm2-2 librdmacm1 libucx0 ibverbs-providers)
du -sh "$G"/bin.tar.xz "$G/debs"

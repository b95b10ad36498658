#!/bin/bash
# Runs no_mpi_process (argument 1) twice: with its components' folder empty
# (DCT_COMPONENT_DIR), and where libmpi, libcudart, libnccl and libcuda
# cannot be loaded (/dev/null bound over each in a private mount namespace;
# without one, e.g. not root: the maps check only). libdct_dir: argument 2.
set -euo pipefail
prog=$1
libdir=$2
empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT
DCT_COMPONENT_DIR=$empty "$prog" missing "$empty"
dirs="$(ldconfig -p | awk '/=>/ {print $NF}' | xargs -r -n1 dirname | sort -u) ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/cuda/lib64"
files=$(for d in $dirs; do ls "$d"/lib{mpi,cudart,nccl,cuda}.so* 2>/dev/null || true; done | xargs -r readlink -f | sort -u)
if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
  echo "hiding: $(echo $files)"
  unshare --mount --propagation private bash -c \
    'for f in $1; do mount --bind /dev/null "$f"; done; exec "$0" missing "$2"' "$prog" "$files" "$libdir"
else
  echo "no private mount namespace here: checking the maps only"
  "$prog" plain
fi

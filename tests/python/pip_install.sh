#!/usr/bin/env bash
# `pip install ./python` into a scratch prefix, then import the installed
# package from elsewhere and find libdct.so the ways users do: LIBDCT_LIBRARY,
# LD_LIBRARY_PATH, and next to the package.
set -euo pipefail
python="$1" src="$2" lib="$3" target="$4"
rm -rf "$target"
mkdir -p "$target"
cp -r "$src" "$target/src"  # setuptools builds in the source folder: keep the checkout clean
"$python" -m pip install --quiet --no-build-isolation --no-deps --target "$target/site" "$target/src"
probe='import libdct, libdct._native as n; print(libdct.__version__, n.lib().version_code, n.lib().dll._name)'
cd "$target"
unset PYTHONPATH
PYTHONPATH="$target/site" LIBDCT_LIBRARY="$lib" "$python" -c "$probe"
PYTHONPATH="$target/site" LD_LIBRARY_PATH="$(dirname "$lib")" "$python" -c "$probe" | grep -q "libdct.so"
cp -L "$lib" "$target/site/libdct/libdct.so.0"
found=$(PYTHONPATH="$target/site" "$python" -c "$probe")
echo "$found"
[[ "$found" == *"$target/site/libdct/libdct.so.0" ]]
# No library anywhere: a clear error naming what was tried.
rm "$target/site/libdct/libdct.so.0"
if out=$(PYTHONPATH="$target/site" LD_LIBRARY_PATH= LIBDCT_LIBRARY="$target/nowhere.so" "$python" -c "$probe" 2>&1); then
  echo "loaded a library that does not exist: $out"; exit 1
fi
echo "$out" | grep -q "libdct.so not found"
echo "pip install ok"

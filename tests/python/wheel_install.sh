#!/usr/bin/env bash
# The package as users install it: `pip wheel` of the checkout (the library
# only, CUDA off to keep CI short), installed into a fresh venv that sees
# Debian's torch, numpy and mpi4py. From outside the source tree, with no
# PYTHONPATH or LIBDCT_LIBRARY, the installed package loads the libdct.so the
# wheel carries and runs a 2-rank gloo allreduce (test_library_agree.py) and
# the DDP hook (test_hook.py). Fails when the wheel lacks libdct.so.
set -euo pipefail
python="$1" src="$2" lib="$3" work="$4" mpiexec="$5"
unset PYTHONPATH LIBDCT_LIBRARY
rm -rf "$work"
mkdir -p "$work/tests"
"$python" -m venv --system-site-packages "$work/venv"
py="$work/venv/bin/python"
settings=(--config-settings=cmake.define.DCT_ENABLE_CUDA=OFF --config-settings=build-dir="$work/build")
if command -v ccache >/dev/null; then
  settings+=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# Build isolation fetches scikit-build-core from the package index, as `pip install .` does.
start=$(date +%s)
"$py" -m pip wheel --quiet --no-deps -w "$work/dist" "${settings[@]}" "$src"
echo "pip wheel: $(($(date +%s) - start)) s"
wheel=$(echo "$work"/dist/libdct-*.whl)
listing=$("$py" -m zipfile -l "$wheel")  # whole, then searched: grep -q in a pipe would break it
echo "$listing"
for name in libdct.so libdct_mpi.so libdct_mpi_preload.so; do
  grep -q "^libdct/$name " <<<"$listing" || { echo "the wheel has no libdct/$name"; exit 1; }
done
"$py" -m pip install --quiet --no-deps "$wheel"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')

cp "$src"/tests/python/{harness.py,test_hook.py,test_library_agree.py} "$work/tests/"
cd "$work/tests"
probe='import libdct, libdct._native as n; print(n.lib().dll._name)'
found=$("$py" -c "$probe")
[[ "$found" == "$site/libdct/libdct.so" ]] || { echo "loaded $found, not the wheel's copy"; exit 1; }
[[ "$(LIBDCT_LIBRARY="$lib" "$py" -c "$probe")" == "$lib" ]]  # the documented override
for script in test_library_agree.py test_hook.py; do
  "$mpiexec" -n 2 --oversubscribe --allow-run-as-root -x MASTER_PORT "$py" "$script"
done
# Without its library the package does not import, and says where it looked.
rm "$site/libdct/libdct.so"
if out=$("$py" -c "$probe" 2>&1); then
  echo "imported without a library: $out"; exit 1
fi
grep -q "$site/libdct/libdct.so (the package's own copy): no such file" <<<"$out"
echo "wheel install ok"

#!/usr/bin/env bash
# ctest install.prefix (docs/building.md "Installing"): what a user outside the tree does.
#   1. cmake --install BUILD into a fresh prefix; nothing there may name LLVM's libomp path;
#   2. test/install/project: find_package(aotc) against that prefix, aotc_add_model() on the
#      MLP with --optimizer=sgd:lr=0.1, built with gcc (the default compilers) and with clang,
#      and run: 20 losses vs PyTorch's golden;
#   3. Debian's python3 -m venv + pip install ./python (offline: --no-build-isolation --no-index, the
#      venv seeing Debian's setuptools and wheel: --system-site-packages), then,
#      outside the source tree and with the prefix's bin/ on PATH, the installed package finds
#      aotc and the prefix's libaotc_runtime.so, compiles and links the MLP and runs its forward
#      vs the same golden's first loss.
# Usage: run.sh BUILD SRC
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

echo "+ cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
ls "$prefix/bin" "$prefix/lib" "$prefix/include/aotc" "$prefix/lib/cmake/aotc" | tr '\n' ' '; echo
if grep -rl "llvm-19/lib/libomp" "$prefix"; then
  echo "error: an installed file names LLVM's libomp path (above)" >&2
  exit 1
fi

# Built twice, as the docs show it: with the default compilers (cc/c++: gcc here) and linker,
# and with clang-19 + lld.
for cc in default clang; do
  echo "+ out-of-tree project ($cc compilers): find_package(aotc) with CMAKE_PREFIX_PATH=$prefix"
  flags=()
  [ "$cc" = clang ] && flags=(-DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld)
  env -u CC -u CXX -u CFLAGS -u CXXFLAGS -u LDFLAGS \
    cmake -S "$src/test/install/project" -B "$tmp/project-$cc" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    "${flags[@]}" -DAOTC_CHECK_MODEL="$src/examples/mlp/mlp.pt2" > "$tmp/configure.log" ||
    { cat "$tmp/configure.log"; exit 1; }
  grep -m1 "The CXX compiler identification" "$tmp/configure.log" || true
  cmake --build "$tmp/project-$cc" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
  "$tmp/project-$cc/train_mlp" "$src/examples/mlp/golden.safetensors"
done

echo "+ pip install $src/python into a venv"
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
cp -r "$src/python" "$tmp/python-src"  # setuptools writes build/ and *.egg-info beside the sources
"$tmp/venv/bin/pip" install -q --no-build-isolation --no-index --no-deps "$tmp/python-src" > "$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log"; exit 1; }
cd "$tmp"
env -u AOTC_BIN -u AOTC_KERNELS_LIB -u AOTC_RUNTIME_LIB -u PYTHONPATH PATH="$prefix/bin:$PATH" AOTC_CACHE_DIR="$tmp/cache" \
  "$tmp/venv/bin/python" - "$src" "$prefix" <<'PY'
import os, sys
import aotc
src, prefix = sys.argv[1], sys.argv[2]
assert not aotc.__file__.startswith(src), f"imported {aotc.__file__}, not the installed package"
exe = aotc.find_aotc()
assert exe == os.path.join(prefix, "bin", "aotc"), exe
rt = aotc.runtime_library()  # the runtime the package runs programs with, beside the aotc binary
assert rt == os.path.join(prefix, "lib", "libaotc_runtime.so"), rt
r = aotc.build_library(os.path.join(src, "examples", "mlp", "mlp.pt2"))
prog = aotc.load(r.library)
golden = aotc.read_safetensors(os.path.join(src, "examples", "mlp", "golden.safetensors"))
inputs = {d.name: golden[("param." if d.role == "parameter" else "input.") + d.name] for d in prog.inputs}
outs, _ = prog.forward(inputs)
loss, want = outs[0].tolist()[0], golden["loss"].tolist()[0]
err = abs(loss - want) / abs(want)
print(f"python: {aotc.__file__} aotc={exe} loss={loss:.7g} golden={want:.7g} rel_err={err:.2g}")
sys.exit(0 if err <= 1e-5 else 1)
PY

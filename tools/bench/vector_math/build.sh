#!/bin/sh
# The f32 vector-math comparison of docs/stage-codegen.md "Vector math": aotc's exp/log/tanh/
# erf/sigmoid kernels against SLEEF 3.5.1 and glibc's libmvec (not project dependencies: needs
# `apt-get install libsleef-dev`). Usage, from the checkout: tools/bench/vector_math/build.sh
# [OUT] (default /tmp/aotc-vector-math), then in OUT:
#   OMP_NUM_THREADS=2 ./ulp sweep 7     every 7th f32 bit pattern, each function (~3 min)
#   ./ulp specials                      NaN, +-inf, +-0, finfo.min/max, denormals, thresholds
#   ONLY="exp/aotc replica,exp/sleef avx512 u10" ./ulp sweep 1   all 2^32 patterns
#   ./runbench.sh                       ns per element, 5 runs pinned to CPU 1 (summary.txt)
set -e
src=$(cd "$(dirname "$0")" && pwd)
aotc=${AOTC:-$src/../../../build/tools/aotc/aotc}
out=${1:-/tmp/aotc-vector-math}
mkdir -p "$out/obj"
cp "$src"/*.cpp "$src"/*.h "$src"/runbench.sh "$src"/summarize.py "$out"/
cd "$out"
for l in 4 3; do "$aotc" "$src/fx_all64k.fx.txt" --cpu x86-64-v$l --name allv$l -o allv$l.o; done
for f in exp log tanh erf sigmoid; do for n in 1048576 16384; do
  printf 'class M(torch.nn.Module):\n    def forward(self, x: "f32[%s]"):\n        %s: "f32[%s]" = torch.ops.aten.%s.default(x)\n        return (%s,)\n' $n $f $n $f $f > obj/${f}_$n.fx.txt
  for l in 4 3; do "$aotc" obj/${f}_$n.fx.txt --cpu x86-64-v$l --name ${f}_${n}_v$l -o obj/${f}_${n}_v$l.o; done
done; done
CXX="clang++-19 -std=c++20 -O3 -march=x86-64-v4 -ffp-contract=on"
$CXX -fopenmp=libomp -I"$src/../../../runtime/include" ulp.cpp allv4.o allv3.o -lsleef -lmvec -lm -o ulp
$CXX -mprefer-vector-width=512 -c replica512.cpp -o replica512.o
$CXX -fopenmp=libomp bench.cpp replica512.o obj/*.o -lsleef -lmvec -lm -o bench

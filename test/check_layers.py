#!/usr/bin/env python3
"""Checks the compiler's layering (docs/architecture.md "Layers"); ctest layering.includes.

Every header under include/aotc/ (and the runtime's public headers) belongs to one library,
HEADER_OWNER below; a new header that is not listed fails the check, so its layer is decided
when it is written. Reads the direct link lists CMake generated (LINKS, one
`<library>: <dep>;<dep>...` line each, file(GENERATE) in test/CMakeLists.txt) and fails on
  * an `#include "aotc/X.h"` in lib/<Stage>/ whose owner is neither that library nor one it
    links (directly or through what it links): an include that goes up or sideways a layer;
  * a library linked directly but never included by the library's sources or its own headers
    (every library links what it calls and nothing else);
  * a third-party header (nlohmann, libzip, yaml-cpp, MLIR/LLVM) included by a library that
    does not link that package, or a package linked but not included.
Link errors of a missing dependency are the linker's: the link.<lib> targets build each
library as a shared object with --no-undefined (test/CMakeLists.txt).

Usage: check_layers.py SRC_ROOT LINKS_FILE
"""
import os
import re
import sys

# Header -> the library whose layer it is in. Header-only descriptions the compiler emits
# against (abi.h: the object's ABI) are readable by every library (owner None).
HEADER_OWNER = {
    "Diagnostics.h": "aotcSupport",
    "Types.h": "aotcIR", "Graph.h": "aotcIR", "OpRegistry.h": "aotcIR", "TextIR.h": "aotcIR",
    "RefEval.h": "aotcIR", "Conv.h": "aotcIR", "Fft.h": "aotcIR", "LinalgGrad.h": "aotcIR", "Pool.h": "aotcIR", "Philox.h": "aotcIR",
    "ScalarOp.h": "aotcIR",
    "SymExpr.h": "aotcIR", "SpecializeSizes.h": "aotcIR", "Dim.h": "aotcIR",
    # The stage entry points: declarations only, owned by IR so that a stage can name the
    # Program type and its own entry point; calling another stage's is a link error.
    "Stages.h": "aotcIR",
    "Capture.h": "aotcCapture",
    "Decompositions.h": "aotcDecompose",
    "Autodiff.h": "aotcAutodiff",
    "Optimizer.h": "aotcOptimizer",
    "Partition.h": "aotcPartition", "MaxFlow.h": "aotcPartition",
    "Codegen.h": "aotcCodegen", "Kernels.h": "aotcCodegen", "Schedule.h": "aotcCodegen", "AbiLayout.h": "aotcCodegen",
    # runtime/include/aotc
    "abi.h": None, "kernels.h": None, "cuda.h": None,
    # The special functions (Boost.Math, header-only): the IR's float64 reference and libaotc_kernels.
    "SpecialMath.h": None,
    "runtime.h": "aotc_runtime", "safetensors.h": "aotc_runtime", "trainer.h": "aotc_runtime", "capi.h": "aotc_runtime",
    # The MPI communicator (runtime/mpi), a library of its own over the runtime.
    "mpi.h": "aotc_mpi",
    # The NCCL communicator (runtime/nccl, dlopen'ed NCCL): its own library, with the CUDA toolkit.
    "nccl.h": "aotc_nccl",
}
# Library -> its folder under lib/.
LIB_DIR = {
    "aotcSupport": "Support", "aotcIR": "IR", "aotcCapture": "Capture",
    "aotcFunctionalize": "Functionalize", "aotcDecompose": "Decompose",
    "aotcAutodiff": "Autodiff", "aotcOptimizer": "Optimizer", "aotcPartition": "Partition",
    "aotcCodegen": "Codegen",
}
# Third-party include prefix -> the link item that provides it.
EXTERNAL = [
    (re.compile(r"nlohmann/"), "nlohmann_json::nlohmann_json"),
    (re.compile(r"zip\.h$"), "PkgConfig::LIBZIP"),
    (re.compile(r"yaml-cpp/"), "yaml-cpp"),
    (re.compile(r"(mlir|llvm)/"), "LLVM|MLIR"),
]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def read_links(path):
    links = {}
    for line in open(path):
        if ":" in line:
            name, deps = line.split(":", 1)
            links[name.strip()] = [d for d in deps.strip().split(";") if d]
    return links


def closure(lib, links):
    seen, todo = set(), [lib]
    while todo:
        for d in links.get(todo.pop(), []):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def includes(paths):
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if m:
                    yield p, n, m.group(1)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    root, links = sys.argv[1], read_links(sys.argv[2])
    errors = []
    headers = sorted(os.listdir(os.path.join(root, "include", "aotc")) +
                     os.listdir(os.path.join(root, "runtime", "include", "aotc")))
    for h in headers:
        if h.endswith(".h") and h not in HEADER_OWNER:
            errors.append(f"include/aotc/{h}: error: header has no layer: add it to HEADER_OWNER "
                          f"in test/check_layers.py")
    own_headers = {}
    for h, o in HEADER_OWNER.items():
        own_headers.setdefault(o, []).append(h)
    for lib, folder in LIB_DIR.items():
        if lib not in links:
            errors.append(f"{sys.argv[2]}: error: no link list for {lib}")
            continue
        direct = links[lib]
        reach = closure(lib, links) | {lib}
        srcs = []
        for dp, _, fs in os.walk(os.path.join(root, "lib", folder)):
            srcs += [os.path.join(dp, f) for f in sorted(fs) if f.endswith((".cpp", ".h"))]
        srcs += [os.path.join(root, "include", "aotc", h) for h in own_headers.get(lib, [])]
        used, used_ext = set(), set()
        for p, n, inc in includes(srcs):
            rel = os.path.relpath(p, root)
            if inc.startswith("aotc/"):
                h = inc[len("aotc/"):]
                if h not in HEADER_OWNER:
                    continue  # reported above, or a private header of the folder
                owner = HEADER_OWNER[h]
                if owner is None or owner == lib:
                    continue
                used.add(owner)
                if owner not in reach:
                    errors.append(f"{rel}:{n}: error: {lib} includes {inc} of {owner}, which it "
                                  f"does not link: an include up or across a layer")
                continue
            for pat, item in EXTERNAL:
                if pat.match(inc):
                    used_ext.add(item)
                    ok = any(re.fullmatch(item, d) or d.startswith(tuple(item.split("|")))
                             for d in direct)
                    if not ok:
                        errors.append(f"{rel}:{n}: error: {lib} includes <{inc}> but does not link "
                                      f"{item}")
        for d in direct:
            if d in LIB_DIR or d == "aotc_runtime":
                if d not in used:
                    errors.append(f"lib/{folder}: error: {lib} links {d} but includes none of its "
                                  f"headers: link only what is called")
            for pat, item in EXTERNAL:
                if (re.fullmatch(item, d) or d.startswith(tuple(item.split("|")))) and \
                        item not in used_ext and item != "LLVM|MLIR":
                    errors.append(f"lib/{folder}: error: {lib} links {d} but includes none of its "
                                  f"headers")
    for e in errors:
        print(e)
    print(f"layering: {len(LIB_DIR)} libraries, {len(HEADER_OWNER)} headers, "
          f"{len(errors)} problem{'s' if len(errors) != 1 else ''}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

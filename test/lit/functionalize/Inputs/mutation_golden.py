#!/usr/bin/env python3
"""`aotc run` on a mutating FX graph vs a torch golden. Standard library only.

Usage:
  mutation_golden.py inputs  FX GOLDEN OUT      write the --inputs file for `aotc run`
  mutation_golden.py compare FX GOLDEN RESULT [--tol 1e-5]

FX is the graph aotc compiles (test/fixtures/functionalize/<fn>.fx.txt); GOLDEN is
<fn>.golden.safetensors (docs/fixtures.md): input.<ph>, output.<i>, mutated.<ph> (the
final value of an input changed in place), grad.<ph> (d output.0 / d the input's value
before the mutation, every floating input).

Output order of the compiled program, derived here from FX alone (docs/stage-functionalize.md):
the N user outputs of FX's `return (...)`, then one `mutated_<ph>` output per mutated
placeholder, in placeholder order. So mutated.<ph> is output N + k for the k-th mutated
placeholder of the forward signature.

`inputs` writes every input.<ph> of GOLDEN under the same key and tangent_0 = 1 (f32[]; the
loss, as torch's backward of output.0). The `mutated_<ph>` outputs get none (their default is 0, abi.h:
a mutated input's new value gets no cotangent from torch's loss; `--mutated-tangents` adds
zero tangent_<N+k> for them: accepted for inputs that require grad, refused for the others). Other user outputs (N > 1) are
rejected: the goldens have one.

`compare` checks, with err(T) = max|a - g| / max|g| (absolute when g is all zeros; NaN is
infinite), output_0 vs output.0, output_<N+k> vs mutated.<ph>, grad_<ph> vs grad.<ph> for
every grad.<ph> in GOLDEN; it also requires RESULT to have exactly the outputs
output_0 .. output_<N+M-1>. Prints one line per tensor and
  max_output_err=%.3g max_mutated_err=%.3g max_grad_err=%.3g
Exit 0 all errors <= tol, 1 an error > tol or a tensor missing / mis-shaped, 2 bad files.
"""
import math
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                                "tools"))
from check_golden import Malformed, read_safetensors, rel_err  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                                "python"))
from aotc import _safetensors as st  # noqa: E402


def parse_fx(path):
    """(placeholder names in order, number of user outputs) of FX graph-code text."""
    text = open(path).read()
    m = re.search(r"def forward\(self(.*?)\):", text, re.S)
    if not m:
        raise Malformed(f"{path}: no 'def forward(self, ...):'")
    names = re.findall(r"[,(]\s*([A-Za-z_]\w*)\s*:", "(" + m.group(1).lstrip(", "))
    r = re.findall(r"^\s*return \((.*)\)\s*$", text, re.M)
    if len(r) != 1:
        raise Malformed(f"{path}: expected one 'return (...)' line")
    outs = [o for o in (s.strip() for s in r[0].split(",")) if o]
    return names, len(outs)


def layout(fx, golden):
    """[(output index, placeholder)] of the mutated outputs, and the number of user outputs."""
    names, n_user = parse_fx(fx)
    mutated = [n for n in names if "mutated." + n in golden]
    unknown = sorted(k for k in golden if k.startswith("mutated.") and k[8:] not in names)
    if unknown:
        raise Malformed(f"{fx}: golden keys {unknown} name no placeholder of the forward")
    return [(n_user + k, n) for k, n in enumerate(mutated)], n_user


def write_safetensors(path, tensors):
    """tensors: [(name, 'F32'|'F64'|'I64', shape, list of values)], written sorted by name."""
    st.write(path, [st.tensor(name, dtype.lower(), shape, values) for name, dtype, shape, values in sorted(tensors)])


def cmd_inputs(fx, golden_path, out, mutated_tangents=False):
    golden, _ = read_safetensors(golden_path)
    muts, n_user = layout(fx, golden)
    if n_user != 1:
        raise Malformed(f"{fx}: {n_user} user outputs; the goldens differentiate one (output.0)")
    ts = [(k, t.dtype, t.shape, list(t.values)) for k, t in golden.items() if k.startswith("input.")]
    ts.append(("tangent_0", "F32", [], [1.0]))
    if mutated_tangents:  # zero cotangents for the mutated inputs' new values
        for i, n in muts:
            g = golden["mutated." + n]
            ts.append((f"tangent_{i}", g.dtype, g.shape, [0.0] * len(g.values)))
    write_safetensors(out, ts)
    return 0


def cmd_compare(fx, golden_path, result_path, tol):
    golden, _ = read_safetensors(golden_path)
    result, _ = read_safetensors(result_path)
    muts, n_user = layout(fx, golden)
    pairs = [("output", f"output_{i}", f"output.{i}") for i in range(n_user)]
    pairs += [("mutated", f"output_{i}", "mutated." + n) for i, n in muts]
    pairs += [("grad", "grad_" + k[5:], k) for k in sorted(golden) if k.startswith("grad.")]
    problems, worst = [], {"output": 0.0, "mutated": 0.0, "grad": 0.0}
    want = {f"output_{i}" for i in range(n_user + len(muts))}
    have = {k for k in result if k.startswith("output_")}
    if have != want:
        problems.append(f"result outputs {sorted(have)}, expected {sorted(want)}")
    for kind, key, gkey in pairs:
        a, g = result.get(key), golden[gkey]
        if a is None or a.shape != g.shape:
            problems.append(f"'{key}' " + ("missing" if a is None else f"has shape {a.shape}") +
                            f", golden '{gkey}' {g.shape}")
            worst[kind] = math.inf
            continue
        e = rel_err(a.values, g.values)
        print(f"{key} vs {gkey}: err={e:.3g}")
        worst[kind] = max(worst[kind], e)
        if not e <= tol:
            problems.append(f"'{key}' vs '{gkey}': err {e:.9g} > tol {tol:g}")
    print("max_output_err=%.3g max_mutated_err=%.3g max_grad_err=%.3g" %
          (worst["output"], worst["mutated"], worst["grad"]), flush=True)
    for p in problems:
        print(f"mutation_golden: FAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


def main(argv):
    try:
        if len(argv) == 4 and argv[0] == "inputs":
            return cmd_inputs(*argv[1:])
        if len(argv) == 5 and argv[0] == "inputs" and argv[4] == "--mutated-tangents":
            return cmd_inputs(*argv[1:4], mutated_tangents=True)
        if len(argv) in (4, 6) and argv[0] == "compare":
            tol = 1e-5
            if len(argv) == 6:
                if argv[4] != "--tol":
                    raise ValueError
                tol = float(argv[5])
            return cmd_compare(argv[1], argv[2], argv[3], tol)
    except Malformed as e:
        print(f"mutation_golden: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:
        print(f"mutation_golden: error: {e}", file=sys.stderr)
        return 2
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

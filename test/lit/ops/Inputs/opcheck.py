#!/usr/bin/env python3
"""End-to-end op checks through the compiled object (`aotc run`, `aotc gradcheck`).

Usage: opcheck.py --aotc AOTC --work DIR CASE [CASE ...]

For every CASE, the FX graph-code input Inputs/<CASE>.fx.txt (written in f32) is
  1. given deterministic inputs (seeded uniform values, per-case ranges that keep
     away from kinks; integer/bool inputs from the case table),
  2. compiled and run with `aotc run` as written (f32) and with every f32 turned
     into f64 (the text's `"f32[` annotations and `torch.float32`),
  3. compared with the forward computed here independently, in Python floats
     (math module) from the same input values:
        f64: |a - r| <= 1e-10 |r| + 1e-12 max|r|     f32: |a - r| <= 1e-5 |r| + 1e-6 max|r|
     (integer and bool outputs equal; NaN/Inf in the same places),
  4. its f32 gradients compared with the f64 ones (1e-4 relative to max|g64|),
  5. gradchecked in f64 (`aotc gradcheck`: central differences of the compiled
     forward, every element checked).
Prints one line per step ("ok <case> ...") and exits 1 if any check fails.
Standard library only.
"""
import argparse
import itertools
import json
import math
import os
import random
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------- tensors --
ST = {"f32": ("F32", "f", 4), "f64": ("F64", "d", 8), "i64": ("I64", "q", 8), "b8": ("BOOL", "B", 1)}
ST_BACK = {v[0]: k for k, v in ST.items()}


class T:
    """A dense row-major tensor: dtype ('f32', 'f64', 'i64', 'b8'), shape, flat values."""

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, list(shape), list(data)
        assert len(self.data) == numel(self.shape), (shape, len(data))

    def at(self, idx):
        return self.data[ravel(idx, self.shape)]


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.insert(0, acc)
        acc *= s
    return st


def ravel(idx, shape):
    return sum(i * s for i, s in zip(idx, strides(shape)))


def indices(shape):
    return itertools.product(*[range(s) for s in shape])


def build(dtype, shape, fn):
    return T(dtype, shape, [fn(i) for i in indices(shape)])


def bcast_shape(*shapes):
    r = max(len(s) for s in shapes)
    out = []
    for k in range(r):
        dims = [s[len(s) - r + k] for s in shapes if len(s) - r + k >= 0]
        big = [d for d in dims if d != 1]
        out.append(big[0] if big else 1)
    return out


def bcast_at(t, idx):
    off = len(idx) - len(t.shape)
    return t.at([0 if t.shape[k] == 1 else idx[off + k] for k in range(len(t.shape))])


def ew(fn, *ts, dtype=None):
    shape = bcast_shape(*[t.shape for t in ts])
    return build(dtype or ts[0].dtype, shape, lambda i: fn(*[bcast_at(t, i) for t in ts]))


def reduce(t, dims, keepdim, fold, dtype=None):
    r = len(t.shape)
    dims = sorted(set(d % r for d in (dims if dims else range(r))))
    kept = [d for d in range(r) if d not in dims]
    oshape = [1 if d in dims else t.shape[d] for d in range(r)] if keepdim else [t.shape[d] for d in kept]

    def one(oi):
        base = list(oi) if keepdim else None
        vals = []
        for ri in indices([t.shape[d] for d in dims]):
            full = [0] * r
            if keepdim:
                full = base[:]
            else:
                for k, d in enumerate(kept):
                    full[d] = oi[k]
            for k, d in enumerate(dims):
                full[d] = ri[k]
            vals.append(t.at(full))
        return fold(vals)

    return build(dtype or t.dtype, oshape, one)


# ---------------------------------------------------------- safetensors --
def write_st(path, tensors):
    st.write(path, [st.tensor(name, "bool" if t.dtype == "b8" else t.dtype, t.shape, t.data)
                    for name, t in tensors.items()])


def read_st(path):
    f = st.read(path)
    out = {}
    for name in f.keys():
        t = f[name]
        dt = "b8" if t.dtype == "bool" else t.dtype
        if dt not in ST:
            raise ValueError(f"{path}: tensor '{name}' has dtype {t.dtype}")
        out[name] = T(dt, list(t.shape), t.tolist())
    return out


def round_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ----------------------------------------------------------------- maths --
def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def softplus(x, beta=1.0, threshold=20.0):
    return x if x * beta > threshold else math.log1p(math.exp(beta * x)) / beta


def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return scale * x if x > 0 else scale * alpha * (math.exp(x * input_scale) - 1.0)


def sign(x):
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


def lse(vals):
    m = max(vals)
    if math.isinf(m):
        return m
    return m + math.log(sum(math.exp(v - m) for v in vals))


def var(vals, correction):
    n = len(vals)
    mu = sum(vals) / n
    return sum((v - mu) ** 2 for v in vals) / max(n - correction, 0)


def argmax_first(vals):
    best = 0
    for i, v in enumerate(vals):
        if math.isnan(v):
            return i
        if v > vals[best]:
            best = i
    return best


def gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_tanh_grad(x):
    k = math.sqrt(2.0 / math.pi)
    t = math.tanh(k * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)


def softmax_dim(t, dim):
    r = len(t.shape)
    dim %= r
    m = reduce(t, [dim], True, lse)
    return ew(lambda v, l: math.exp(v - l), t, m)


def log_softmax_dim(t, dim):
    m = reduce(t, [dim], True, lse)
    return ew(lambda v, l: v - l, t, m)


def matmul(a, b):
    # [.., m, k] x [.., k, n]
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = a.shape[:-2]
    return build(a.dtype, batch + [m, n], lambda i: sum(
        a.at(list(i[:-2]) + [i[-2], q]) * b.at(list(i[:-2]) + [q, i[-1]]) for q in range(k)))


def transpose2(t):
    return build(t.dtype, [t.shape[1], t.shape[0]], lambda i: t.at([i[1], i[0]]))


def layer_norm_last(x, w, b, eps):
    d = x.shape[-1]

    def row(idx):
        base = list(idx[:-1])
        vals = [x.at(base + [j]) for j in range(d)]
        mu = sum(vals) / d
        v = sum((u - mu) ** 2 for u in vals) / d
        return (x.at(list(idx)) - mu) / math.sqrt(v + eps) * w.data[idx[-1]] + b.data[idx[-1]]

    return build(x.dtype, x.shape, row)


def slice_idx(size, start, end, step):
    start = 0 if start is None else (start + size if start < 0 else start)
    end = size if end is None else (end + size if end < 0 else end)
    start, end = min(max(start, 0), size), min(max(end, start), size)
    return list(range(start, end, step))


def scalar(dtype, v):
    return T(dtype, [], [v])


# Special functions, from their textbook definitions (not the libraries aotc calls): Hurwitz
# zeta by a shifted sum plus its Euler-Maclaurin tail; the Bessel functions by their integral
# representations (A&S 9.1.21, 9.1.22 / 9.6.19, 9.6.24) with composite Simpson; erfinv and
# ndtri by Newton on math.erf / math.erfc.
def simpson(f, a, b, n=2000):
    h = (b - a) / n
    return h / 3 * (f(a) + f(b) + sum((4 if k % 2 else 2) * f(a + k * h) for k in range(1, n)))


def hurwitz_tail(s, y):
    # sum_{k>=0} (y+k)^-s for y >= 30: Euler-Maclaurin to the B6 term
    return (y ** (1 - s) / (s - 1) + 0.5 * y ** -s + s / 12 * y ** (-s - 1)
            - s * (s + 1) * (s + 2) / 720 * y ** (-s - 3) + s * (s + 1) * (s + 2) * (s + 3) * (s + 4) / 30240 * y ** (-s - 5))


def digamma_ref(x):
    r = -sum(1 / (x + k) for k in range(40))
    y = x + 40
    return r + math.log(y) - 1 / (2 * y) - 1 / (12 * y ** 2) + 1 / (120 * y ** 4) - 1 / (252 * y ** 6)


def polygamma_ref(n, x):
    s = n + 1
    z = sum((x + k) ** -s for k in range(40)) + hurwitz_tail(s, x + 40)
    return (-1) ** (n + 1) * math.factorial(n) * z


def bessel_j(n, x):
    return simpson(lambda t: math.cos(n * t - x * math.sin(t)), 0, math.pi) / math.pi


def bessel_i(n, x):
    return simpson(lambda t: math.exp(x * math.cos(t)) * math.cos(n * t), 0, math.pi) / math.pi


def bessel_y(n, x):
    a = simpson(lambda t: math.sin(x * math.sin(t) - n * t), 0, math.pi) / math.pi
    b = simpson(lambda t: (math.exp(n * t) + (-1) ** n * math.exp(-n * t)) * math.exp(-x * math.sinh(t)), 0, 12, 6000)
    return a - b / math.pi


def bessel_k(n, x):
    return simpson(lambda t: math.exp(-x * math.cosh(t)) * math.cosh(n * t), 0, 12, 6000)


def newton(f, df, x0):
    x = x0
    for _ in range(60):
        x -= f(x) / df(x)
    return x


def erfinv_ref(y):
    return newton(lambda x: math.erf(x) - y, lambda x: 2 / math.sqrt(math.pi) * math.exp(-x * x), 0.0)


def ndtri_ref(p):
    return newton(lambda x: 0.5 * math.erfc(-x / math.sqrt(2)) - p,
                  lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi), 0.0)


# ------------------------------------------------------------------ cases --
# Each case: inputs (name -> generator spec or tensor builder), expected(inputs) -> [outputs].
# Generator spec: ("u", lo, hi) uniform floats; ("away", lo, hi, points, gap) uniform but at
# least `gap` from every kink in `points`; callables (shape, rng) -> values for the rest.
U = ("u", -2.0, 2.0)


def away(lo, hi, points, gap=0.1):
    return ("away", lo, hi, points, gap)


def ints(*vals):
    return lambda shape, rng: list(vals)


def bools(*vals):
    return lambda shape, rng: [bool(v) for v in vals]


def floats(*vals):
    return lambda shape, rng: [float(v) for v in vals]


F = lambda fn: (lambda i: [ew(fn, i["x"])])

CASES = {
    # --- pointwise: binary, clamps --------------------------------------------------
    "maximum": ({}, lambda i: [ew(max, i["x"], i["y"])]),
    "minimum": ({}, lambda i: [ew(min, i["x"], i["y"])]),
    "clamp": ({"x": away(-2, 2, [-0.5, 0.8, 0.5])},
              lambda i: [ew(lambda v: min(max(v, -0.5), 0.8), i["x"]), ew(lambda v: min(v, 0.5), i["x"])]),
    "clamp_min": ({"x": away(-2, 2, [0.25])}, F(lambda v: max(v, 0.25))),
    "abs": ({"x": away(-2, 2, [0.0])}, F(abs)),
    # sign is non-differentiable: grad of x is zero (torch: sgn's derivative is 0); gradcheck
    # only checks y (x holds exact zeros, where sign jumps).
    "sign": ({"x": floats(-1.5, 0.0, 2.0, -0.25, 0.0, 3.0)},
             lambda i: [ew(sign, i["x"]), ew(lambda a, b: sign(a) * b, i["x"], i["y"])],
             {"grads": lambda i: {"x": ew(lambda v: 0.0, i["x"]), "y": ew(sign, i["x"])},
              "gradcheck": ["--freeze=x"]}),
    # --- unary math --------------------------------------------------------------------
    "sin": ({"x": ("u", -4.0, 4.0)}, F(math.sin)),
    "cos": ({"x": ("u", -4.0, 4.0)}, F(math.cos)),
    "erf": ({}, F(math.erf)),
    # Small arguments: log(1 + x) / exp(x) - 1 in f32 would miss the tolerance there.
    "log1p": ({"x": floats(-1e-3, 1e-7, -3e-8, 2e-5, 1e-3, 5e-6)}, F(math.log1p)),
    "expm1": ({"x": floats(-1e-3, 1e-7, -3e-8, 2e-5, 1e-3, -1e-4)}, F(math.expm1)),
    "log1p_expm1_wide": ({"x": ("u", -0.9, 3.0)}, lambda i: [ew(math.log1p, i["x"]), ew(math.expm1, i["x"])]),
    "reciprocal": ({"x": away(-2, 2, [0.0], 0.3)}, F(lambda v: 1.0 / v)),
    "square": ({}, F(lambda v: v * v)),
    # --- activations ---------------------------------------------------------------------
    "hardtanh": ({"x": away(-2, 2, [-0.5, 0.5])}, F(lambda v: min(max(v, -0.5), 0.5))),
    "leaky_relu": ({"x": away(-2, 2, [0.0])}, F(lambda v: v if v > 0 else 0.2 * v)),
    "elu": ({"x": away(-2, 2, [0.0])}, lambda i: [ew(lambda v: elu(v, 1.5), i["x"]),
                                                  ew(lambda v: elu(v, 0.5, 2.0, 1.5), i["x"])]),
    "silu": ({"x": ("u", -4.0, 4.0)}, F(lambda v: v * sigmoid(v))),
    "softplus": ({"x": away(-2, 2, [0.5])}, lambda i: [ew(softplus, i["x"]),
                                                       ew(lambda v: softplus(v, 2.0, 1.0), i["x"])]),
    "gelu": ({}, lambda i: [ew(gelu, i["x"]), ew(gelu_tanh, i["x"])]),
    "pointwise_e2e": ({"x": ("u", 0.5, 2.0), "y": ("u", -1.0, 1.0)},
                      lambda i: [ew(lambda a, b: (math.tanh(a) - b) * sigmoid(b) / math.sqrt(a)
                                    + math.exp(-a) * math.log(a) * (1.0 / math.sqrt(a)) + max(b, 0.0) - a ** 3,
                                    i["x"], i["y"])]),
    "where_cmp": ({"x": away(-2, 2, [0.0, 0.5])},
                  lambda i: [ew(lambda a, b: a if (a > 0.5 or a < b) else (b if a != 0 else 0.0) * 2.0,
                                i["x"], i["y"])]),
    "pow_tensor": ({"x": ("u", 0.5, 2.0), "e": ("u", -1.5, 2.0)}, lambda i: [ew(math.pow, i["x"], i["e"])]),
    # Backward helpers as ops of their own (second-order rules).
    "backward_ops": ({"x": away(-2, 2, [0.25])}, lambda i: (lambda g, x: [
        ew(lambda a, b: a if b > 0.25 else 0.0, g, x),
        ew(lambda a, b: a * (0.5 * (1 + math.erf(b / math.sqrt(2))) + b * math.exp(-b * b / 2) / math.sqrt(2 * math.pi)), g, x),
        ew(lambda a, b: a * gelu_tanh_grad(b), g, x),
        ew(lambda gy, y, s: y * (gy - s), g, x, reduce(ew(lambda a, b: a * b, g, x), [1], True, sum)),
        ew(lambda gg, y, s: gg - math.exp(y) * s, g, x, reduce(g, [0], True, sum))])(i["g"], i["x"])),
    # --- reductions ----------------------------------------------------------------------------
    "var": ({}, lambda i: [reduce(i["x"], [1], True, lambda v: var(v, 1)),
                           reduce(i["x"], None, False, lambda v: var(v, 0)),
                           reduce(i["x"], [0, 2], False, lambda v: var(v, 2))]),
    "argmax": ({"x": floats(1, 3, 3, 0, 2, 2, 2, 1, -1, 5, 5, 5)},
               lambda i: [reduce(i["x"], [1], False, argmax_first, "i64"),
                          reduce(i["x"], None, False, argmax_first, "i64"),
                          reduce(i["x"], [0], True, argmax_first, "i64")],
               {"grads": lambda i: {"x": ew(lambda v: 0.0, i["x"])}}),
    # --- special functions (lib/IR/ops/Special.cpp; references above) ---------------------------
    "special_pos": ({"x": ("u", 0.3, 4.0)}, lambda i: [ew(f, i["x"]) for f in (
        math.lgamma, digamma_ref, lambda v: polygamma_ref(1, v), lambda v: polygamma_ref(3, v), math.erfc,
        lambda v: math.exp(v * v) * math.erfc(v), lambda v: bessel_y(0, v), lambda v: bessel_y(1, v),
        lambda v: bessel_k(0, v), lambda v: bessel_k(1, v))]),
    "special_neg": ({"x": away(-2.9, -0.1, [-2.0, -1.0], 0.15)}, lambda i: [ew(f, i["x"]) for f in (
        math.lgamma, digamma_ref, lambda v: polygamma_ref(2, v))]),
    "special_sym": ({"x": away(-4.0, 4.0, [0.0], 0.2)}, lambda i: [ew(f, i["x"]) for f in (
        lambda v: bessel_i(0, v), lambda v: math.exp(-abs(v)) * bessel_i(0, v), lambda v: bessel_i(1, v),
        lambda v: math.exp(-abs(v)) * bessel_i(1, v), lambda v: bessel_j(0, v), lambda v: bessel_j(1, v),
        lambda v: bessel_i(0, v), lambda v: bessel_i(1, v))]),
    "special_unit": ({"x": ("u", 0.05, 0.95)}, lambda i: [ew(erfinv_ref, i["x"]), ew(ndtri_ref, i["x"])]),
    "logsumexp": ({"x": floats(*[0.3 * k - 1.0 for k in range(8)] + [100.0, 101.0, 99.0, 100.5] +
                                [-0.7, 0.2, 1.1, -1.9] + [float("-inf"), 1.0, 2.0, float("-inf")])},
                  lambda i: [reduce(i["x"], [1], True, lse), reduce(i["x"], [0, 1], False, lse)]),
    "reductions_e2e": ({}, lambda i: [reduce(i["x"], None, False, sum),
                                      reduce(i["x"], [0], True, lambda v: sum(v) / len(v)),
                                      reduce(i["x"], [-1], False, max),
                                      reduce(i["x"], [1], False, min),
                                      reduce(i["x"], None, False, lambda v: sum(v) / len(v))]),
    # --- shape ops ----------------------------------------------------------------------------
    "cat": ({}, lambda i: [build("f32", [2, 5], lambda k: i["x"].at([k[0], k[1]]) if k[1] < 3
                                 else i["y"].at([k[0], k[1] - 3])),
                           build("f32", [7, 2], lambda k: i["z"].at([k[0], k[1]]) if k[0] < 4
                                 else i["x"].at([k[1], k[0] - 4]) * 2.0)]),
    "slice": ({}, lambda i: [build("f32", [3, len(slice_idx(7, 1, None, 2))],
                                   lambda k: i["x"].at([k[0], slice_idx(7, 1, None, 2)[k[1]]])),
                             build("f32", [2, 7], lambda k: i["x"].at([slice_idx(3, -2, None, 1)[k[0]], k[1]])),
                             build("f32", [3, 2], lambda k: i["x"].at([k[0], slice_idx(7, 2, -3, 1)[k[1]]]))]),
    "select": ({}, lambda i: [build("f32", [2, 4], lambda k: i["x"].at([2, k[0], k[1]])),
                              build("f32", [3, 2], lambda k: i["x"].at([k[0], k[1], 1]) + 1.0)]),
    "split": ({}, lambda i: [build("f32", [3, 2], lambda k: i["x"].at([k[0], k[1]])),
                             build("f32", [3, 2], lambda k: i["x"].at([k[0], k[1] + 2]) * 2.0),
                             build("f32", [3, 1], lambda k: i["x"].at([k[0], 4]) * 3.0)]),
    "views_e2e": ({}, lambda i: [build("f32", [4, 3], lambda k: i["x"].at([k[1], k[0]]) * 2.0),
                                 build("f32", [3, 2, 2], lambda k: i["x"].at([k[0], 2 * k[1] + k[2]]) + 1.0),
                                 build("f32", [2, 3, 4], lambda k: i["x"].at([k[1], k[2]])),
                                 build("f32", [3, 4], lambda k: i["x"].at([k[0], k[1]]) * i["x"].at([k[0], k[1]]))]),
    # --- index ops ------------------------------------------------------------------------------
    "index_select": ({"idx": ints(2, 0, 2, 1)},
                     lambda i: [build("f32", [4, 3], lambda k: i["x"].at([i["idx"].data[k[0]], k[1]])),
                                build("f32", [3, 2], lambda k: i["y"].at([k[0], i["idx"].data[k[1]]]))]),
    "gather": ({"idx": ints(0, 2, 3, 3, 1, 0)},
               lambda i: [build("f32", [3, 2], lambda k: i["x"].at([k[0], i["idx"].at(k)]))]),
    "embedding": ({"idx": ints(1, 4, 1, 0, 2, 1)},
                  lambda i: [build("f32", [2, 3, 3], lambda k: i["w"].at([i["idx"].at(k[:2]), k[2]])),
                             build("f32", [4, 3], lambda k: i["w"].at([i["idx"].data[k[0] + 1], k[1]]) * 2.0)]),
    # padding_idx / scale_grad_by_freq change only the backward, which then is not the
    # derivative of the forward: gradients are checked against embedding_dense_backward
    # (tangents = ones): grad w[r] = sum over positions p with idx[p] == r (!= padding_idx)
    # of the tangent row, divided by the count of r when scale_grad_by_freq.
    "embedding_padding": ({"idx": ints(1, 4, 1, 0, 2, 1)},
                          lambda i: [build("f32", [2, 3, 3], lambda k: i["w"].at([i["idx"].at(k[:2]), k[2]]))] * 2,
                          {"grads": lambda i: {"w": build("f32", [5, 3], lambda k: (
                              (i["idx"].data.count(k[0]) if k[0] != 1 else 0) +
                              (1.0 if k[0] in i["idx"].data else 0.0)))},
                           "gradcheck": None}),
    "masked_fill": ({"m": bools(1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1)},
                    lambda i: [ew(lambda a, m: -1.5 if m else a, i["x"], i["m"]),
                               ew(lambda a, b: 0.25 if b > 0.3 else a, i["x"], i["y"])]),
    # --- factories ------------------------------------------------------------------------------
    "full": ({}, lambda i: [T("f32", [2, 3], [1.5] * 6), ew(lambda v: v + 1.5, i["x"])]),
    "full_like": ({}, lambda i: [ew(lambda v: v * 2.0 + 3.0, i["x"]), ew(lambda v: 0.0, i["x"]),
                                 ew(lambda v: v - 1.0, i["x"])]),
    "arange": ({}, lambda i: [T("i64", [5], list(range(5))),
                              T("f32", [5], [0.5 + 0.5 * k for k in range(5)]),
                              T("i64", [4], [7, 5, 3, 1]),
                              build("f32", [3, 4], lambda k: i["x"].at(k) * (k[1] - 1.5))]),
    "tril": ({}, lambda i: [build("f32", [2, 3, 4], lambda k: i["x"].at(k) if k[2] - k[1] <= 1 else 0.0),
                            build("f32", [2, 3, 4], lambda k: i["x"].at(k) if k[2] - k[1] <= -1 else 0.0)]),
    "triu": ({}, lambda i: [build("f32", [2, 3, 4], lambda k: i["x"].at(k) if k[2] - k[1] >= -1 else 0.0),
                            build("f32", [3, 4], lambda k: i["x"].at([1] + list(k)) if k[1] - k[0] >= 2 else 0.0)]),
    "factories_noinput": ({}, lambda i: [T("f32", [2, 3], [-0.75 * 0.5 * k for k in range(6)]),
                                         T("i64", [3], [0, 1, 2])]),
    # Domains above the parallel threshold (4096 elements): outputs must not depend on the
    # number of threads (compared bytewise with OMP_NUM_THREADS=1 and 2).
    "big": ({"x": ("u", -3.0, 3.0)},
            lambda i: [reduce(i["x"], [1], False, argmax_first, "i64"),
                       reduce(i["x"], [1], True, lse),
                       reduce(i["x"], [0], False, lambda v: var(v, 1)),
                       build("f32", [64, 96], lambda k: math.sin(i["x"].at(k)) if k[1] <= k[0] else 0.0),
                       build("f32", [64, 192], lambda k: i["x"].at([k[0], k[1] % 96]) * (1.0 if k[1] < 96 else 2.0))],
            {"threads": True, "gradcheck": ["--samples", "40"]}),
    # --- losses and composites ----------------------------------------------------------------
    "mse_loss": ({}, lambda i: [scalar("f32", sum((a - b) ** 2 for a, b in zip(i["x"].data, i["y"].data)) / 12),
                                ew(lambda a, b: (a - b) ** 2, i["x"], i["y"]),
                                scalar("f32", sum((a - b) ** 2 for a, b in zip(i["x"].data, i["y"].data)))]),
    "softmax": ({}, lambda i: [softmax_dim(i["x"], 1), log_softmax_dim(i["x"], 0)]),
    "linear_ln": ({}, lambda i: [layer_norm_last(
        ew(lambda a, b: a + b, matmul(i["x"], transpose2(i["w"])), i["b"]), i["lw"], i["lb"], 1e-5)]),
    "bmm": ({}, lambda i: [matmul(i["x"], i["y"])]),
    # K-dim cross entropy (class dim 1), with class weights and ignore_index 1 (weighted mean).
    "cross_entropy_nd": ({"t": ints(2, 0, 1, 1, 0, 2, 2, 1), "w": ("u", 0.5, 2.0)}, lambda i: (lambda lp, t, w: [
        scalar("f32", -sum(lp.at([n, t.at([n, s]), s]) for n in range(2) for s in range(4)) / 8),
        build("f32", [2, 4], lambda k: 0.0 if t.at(k) == 1 else -w.data[t.at(k)] * lp.at([k[0], t.at(k), k[1]])),
        scalar("f32", -sum(w.data[t.at([n, s])] * lp.at([n, t.at([n, s]), s]) for n in range(2) for s in range(4)
                           if t.at([n, s]) != 1) /
               sum(w.data[t.at([n, s])] for n in range(2) for s in range(4) if t.at([n, s]) != 1))])(
        log_softmax_dim(i["x"], 1), i["t"], i["w"])),
    "cross_entropy": ({"t": ints(2, 0, 3, 1)}, lambda i: [scalar("f32", -sum(
        log_softmax_dim(i["x"], 1).at([r, i["t"].data[r]]) for r in range(4)) / 4)]),
}


def parse_inputs(text):
    m = re.search(r"def forward\(self(.*?)\):", text, re.S)
    return [(n, d, [int(s) for s in dims.split(",") if s.strip()])
            for n, d, dims in re.findall(r'(\w+): "(\w+)\[([0-9, ]*)\]"', m.group(1))]


def gen_inputs(case, spec, text, rng):
    out = {}
    for name, dtype, shape in parse_inputs(text):
        g = spec.get(name, U)
        n = numel(shape)
        if callable(g):
            vals = g(shape, rng)
        elif g[0] == "u":
            vals = [rng.uniform(g[1], g[2]) for _ in range(n)]
        else:
            _, lo, hi, pts, gap = g
            vals = []
            while len(vals) < n:
                v = rng.uniform(lo, hi)
                if all(abs(v - p) >= gap for p in pts):
                    vals.append(v)
        if dtype == "f32":
            vals = [round_f32(v) for v in vals]
        out[name] = T(dtype, shape, vals)
    return out


def close(a, r, rtol, atol_rel):
    if a.shape != r.shape:
        return "shape %s != expected %s" % (a.shape, r.shape), 0.0
    if a.dtype in ("i64", "b8") or r.dtype in ("i64", "b8"):
        bad = [k for k, (x, y) in enumerate(zip(a.data, r.data)) if x != y]
        return ("element %d: %r != %r" % (bad[0], a.data[bad[0]], r.data[bad[0]]) if bad else None), 0.0
    finite = [abs(v) for v in r.data if math.isfinite(v)]
    scale = max(finite) if finite else 0.0
    worst = 0.0
    for k, (x, y) in enumerate(zip(a.data, r.data)):
        if math.isnan(y) or math.isinf(y):
            same = (math.isnan(x) and math.isnan(y)) or x == y
            if not same:
                return "element %d: %r != %r" % (k, x, y), worst
            continue
        tol = rtol * abs(y) + atol_rel * scale
        err = abs(x - y)
        worst = max(worst, err / tol if tol > 0 else (0.0 if err == 0 else math.inf))
        if err > tol:
            return "element %d: %.17g != %.17g (|err| %.3g > tol %.3g)" % (k, x, y, err, tol), worst
    return None, worst


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def check_case(args, case):
    spec, expected = CASES[case][:2]
    opts = CASES[case][2] if len(CASES[case]) > 2 else {}
    src = os.path.join(HERE, case + ".fx.txt")
    with open(src) as f:
        text = f.read()
    rng = random.Random(case)
    inputs = gen_inputs(case, spec, text, rng)
    os.makedirs(args.work, exist_ok=True)
    inp = os.path.join(args.work, case + ".in.safetensors")
    write_st(inp, inputs)
    failures = []
    grads = {}
    for dt in ("f32", "f64"):
        t = text if dt == "f32" else text.replace('"f32[', '"f64[').replace("torch.float32", "torch.float64")
        fx = os.path.join(args.work, "%s.%s.fx.txt" % (case, dt))
        with open(fx, "w") as f:
            f.write(t)
        ins = {k: (T("f64", v.shape, v.data) if v.dtype == "f32" and dt == "f64" else v) for k, v in inputs.items()}
        inp_dt = os.path.join(args.work, "%s.%s.in.safetensors" % (case, dt))
        write_st(inp_dt, ins)
        out = os.path.join(args.work, "%s.%s.out.safetensors" % (case, dt))
        rc, log = run([args.aotc, "run", fx, "--inputs", inp_dt, "--out", out])
        if rc != 0:
            failures.append("%s run (%s): exit %d: %s" % (case, dt, rc, log.strip()))
            continue
        res = read_st(out)
        exp = expected(inputs)
        rtol, atol = (1e-5, 1e-6) if dt == "f32" else (1e-10, 1e-12)
        worst = 0.0
        for k, e in enumerate(exp):
            a = res.get("output_%d" % k)
            if a is None:
                failures.append("%s run (%s): no output_%d" % (case, dt, k))
                continue
            msg, w = close(a, e, rtol, atol)
            worst = max(worst, w)
            if msg:
                failures.append("%s forward (%s) output_%d: %s" % (case, dt, k, msg))
        if "output_%d" % len(exp) in res:
            failures.append("%s run (%s): more outputs than expected" % (case, dt))
        print("ok %s forward %s outputs=%d worst_err_over_tol=%.3g" % (case, dt, len(exp), worst)
              if not failures else "checked %s forward %s" % (case, dt))
        grads[dt] = {k: v for k, v in res.items() if k.startswith("grad_")}
        if opts.get("threads"):
            outs = {}
            for nt in ("1", "2"):
                o = out + ".t" + nt
                p = subprocess.run([args.aotc, "run", fx, "--inputs", inp_dt, "--out", o],
                                   env=dict(os.environ, OMP_NUM_THREADS=nt), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
                with open(o, "rb") as f:
                    outs[nt] = f.read() if p.returncode == 0 else None
            if outs["1"] is None or outs["1"] != outs["2"]:
                failures.append("%s (%s): outputs differ between 1 and 2 threads" % (case, dt))
            else:
                print("ok %s %s identical with 1 and 2 threads" % (case, dt))
        if "grads" in opts:
            for name, e in opts["grads"](inputs).items():
                a = res.get("grad_" + name)
                msg, _ = close(a, e, rtol, atol) if a is not None else ("missing", 0)
                if msg:
                    failures.append("%s grad_%s (%s): %s" % (case, name, dt, msg))
            print("checked %s expected grads %s" % (case, dt))
    if "f32" in grads and "f64" in grads:
        g32, g64 = grads["f32"], grads["f64"]
        if sorted(g32) != sorted(g64):
            failures.append("%s: gradients differ in names: %s vs %s" % (case, sorted(g32), sorted(g64)))
        for name in sorted(g64):
            if name not in g32:
                continue
            msg, _ = close(g32[name], g64[name], 1e-4, 1e-4)
            if msg:
                failures.append("%s %s f32 vs f64: %s" % (case, name, msg))
        print("ok %s grads f32~f64 %s" % (case, ",".join(sorted(g64)) or "none"))
    if "gradcheck" in opts and opts["gradcheck"] is None:
        print("ok %s gradcheck skipped (backward is not the forward's derivative)" % case)
        return failures
    gc = opts.get("gradcheck", [])
    rc, log = run([args.aotc, "gradcheck", src, "--inputs", inp] +
                  ([] if "--samples" in gc else ["--samples", "1000000"]) + gc)
    if rc != 0 or "FAIL" in log:
        failures.append("%s gradcheck: exit %d:\n%s" % (case, rc, log.strip()))
    else:
        n = log.count(" ok")
        print("ok %s gradcheck lines=%d" % (case, n))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aotc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("cases", nargs="+")
    args = ap.parse_args()
    failures = []
    for c in args.cases:
        if c not in CASES:
            print("unknown case " + c, file=sys.stderr)
            return 2
        failures += check_case(args, c)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Hand-written samples for registry overloads that no OpInfo reaches (docs/conformance.md).

OpInfo samples call public functions (torch.add, F.gelu, ...); torch.export then picks the
overload. Some overloads of aotc's registry never come out of that path (`add.Scalar`,
`_to_copy`, `scalar_tensor`, the `*_backward*` ops, ...), so they get samples here, written in
the OpInfo style: small shapes (0-d included), negative dims, broadcasting where the schema
allows it, values on kinks and ties where the op has them (never filtered by outcome).

EXTRA maps an overload target ("aten.add.Scalar") to a function (dtype, make) -> list of
(fn, args, kwargs); `make(shape, **make_tensor kwargs)` makes a seeded tensor of `dtype` that
requires grad (pass requires_grad=False for inputs torch does not differentiate).
TRACE lists overloads that torch.export rewrites even when they are kept out of the
decomposition table (reshape -> view, lift_fresh_copy -> clone): their graphs are traced with
torch.fx instead of exported (gen.py, `fx_trace`).
"""
import torch

aten = torch.ops.aten


def _ints(make, shape, low=-3, high=3, dtype=None):
    """Small integer values in a floating tensor: ties and exact comparisons happen."""
    t = make(shape, requires_grad=False)
    return torch.randint(low, high, shape).to(t.dtype).requires_grad_(True)


def _scalar_binary(op):
    def samples(dtype, make):
        return [
            (op, (make((5, 5)), 2.5), {}),
            (op, (make(()), -1.25), {}),
            (op, (make((3, 4, 2)), 3), {}),
            (op, (make((2, 3)), 0.5), {}),
        ]
    return samples


def _scalar_binary_alpha(op):
    def samples(dtype, make):
        return _scalar_binary(op)(dtype, make) + [
            (op, (make((4, 3)), 1.5), {"alpha": 2}),
            (op, (make((5,)), -2), {"alpha": -0.5}),
        ]
    return samples


def _compare_scalar(op):
    def samples(dtype, make):
        return [
            (op, (_ints(make, (5, 5)), 1), {}),
            (op, (_ints(make, ()), 0.0), {}),
            (op, (_ints(make, (3, 4, 2)), -1.5), {}),
            (op, (make((6,)), 0.25), {}),
        ]
    return samples


def _to_copy(dtype, make):
    other = torch.float64 if dtype == torch.float32 else torch.float32
    idx = torch.tensor([[3, -1, 0], [7, 2, -5]])
    return [
        (aten._to_copy.default, (make((4, 5)),), {"dtype": other}),
        (aten._to_copy.default, (make(()),), {"dtype": other}),
        (aten._to_copy.default, (make((3, 2)),), {}),
        (aten._to_copy.default, (make((2, 3, 2)),), {"dtype": dtype}),
        (aten._to_copy.default, (make((5,), low=-4, high=4),), {"dtype": torch.int64}),
        (aten._to_copy.default, (_ints(make, (4, 4), -1, 2),), {"dtype": torch.bool}),
        (aten._to_copy.default, (idx,), {"dtype": dtype}),
    ]


def _pow_scalar(dtype, make):
    op = aten.pow.Tensor_Scalar
    return [
        (op, (make((5, 5)), 2), {}),
        (op, (make((4, 3)), 3), {}),
        (op, (make((6,), low=0.1, high=3.0), 0.5), {}),
        (op, (make((2, 3), low=0.5, high=2.0), -1), {}),
        (op, (make((), low=0.1, high=2.0), 2.5), {}),
        (op, (make((3, 2)), 0), {}),
        (op, (make((3, 2)), 1), {}),
    ]


def _clamp(dtype, make):
    op = aten.clamp.default
    return [
        (op, (make((5, 5)), -0.5, 0.5), {}),
        (op, (make((4, 3)), None, 0.3), {}),
        (op, (make((6,)), -0.2, None), {}),
        (op, (make(()), -1.0, 1.0), {}),
        (op, (_ints(make, (3, 4)), -1, 1), {}),  # values on the bounds
        (op, (make((2, 3)), 0.5, -0.5), {}),     # min > max: everything becomes max
    ]


def _clamp_min(dtype, make):
    op = aten.clamp_min.default
    return [
        (op, (make((5, 5)), 0.1), {}),
        (op, (make((3, 4, 2)), -0.3), {}),
        (op, (make(()), 0.0), {}),
        (op, (_ints(make, (4, 4)), 0), {}),
    ]


def _alias(dtype, make):
    return [(aten.alias.default, (make(s),), {}) for s in [(5, 5), (), (3, 2, 4)]]


def _detach(dtype, make):
    # No gradient: torch's result does not require grad, so the inputs are frozen; that
    # detach stops a gradient is checked by the flash attention samples (their logsumexp).
    return [(aten.detach.default, (make(s),), {}) for s in [(5, 5), (), (3, 2, 4)]]


def _lift_fresh_copy(dtype, make):
    return [(aten.lift_fresh_copy.default, (make(s),), {}) for s in [(5, 5), (), (3, 2, 4)]]


def _reshape(dtype, make):
    op = aten.reshape.default
    return [
        (op, (make((4, 6)), [6, 4]), {}),
        (op, (make((2, 3, 4)), [-1]), {}),
        (op, (make(()), [1, 1]), {}),
        (op, (make((5,)), [5, 1]), {}),
        (op, (make((2, 3, 4)), [3, -1]), {}),
    ]


def _unsafe_view(dtype, make):
    op = aten._unsafe_view.default
    return [
        (op, (make((4, 6)), [6, 4]), {}),
        (op, (make((2, 3, 4)), [24]), {}),
        (op, (make(()), [1]), {}),
        (op, (make((5, 2)), [2, 5, 1]), {}),
    ]


def _scalar_tensor(dtype, make):
    return [
        (aten.scalar_tensor.default, (2.5,), {"dtype": dtype}),
        (aten.scalar_tensor.default, (-3,), {"dtype": dtype}),
        (lambda x: aten.mul.Tensor(x, aten.scalar_tensor.default(1.5, dtype=dtype)),
         (make((4, 3)),), {}),
        (aten.scalar_tensor.default, (7,), {"dtype": torch.int64}),
    ]


def _where_scalar_other(dtype, make):
    op = aten.where.ScalarOther
    c = torch.tensor([[True, False, True], [False, False, True]])
    return [
        (op, (c, make((2, 3)), 0.5), {}),
        (op, (c, make((3,)), -2.0), {}),              # condition broadcasts self
        (op, (torch.tensor(True), make((4, 2)), 1), {}),
        (op, (make((5, 5), requires_grad=False) > 0, make((5, 5)), 0.0), {}),
    ]


def _where_scalar_self(dtype, make):
    op = aten.where.ScalarSelf
    c = torch.tensor([[True, False, True], [False, False, True]])
    return [
        (op, (c, 0.5, make((2, 3))), {}),
        (op, (c, -2.0, make((3,))), {}),
        (op, (torch.tensor(False), 1, make((4, 2))), {}),
        (op, (make((5, 5), requires_grad=False) > 0, 0.0, make((5, 5))), {}),
    ]


def _softmax_bwd(log):
    op = aten._log_softmax_backward_data.default if log else aten._softmax_backward_data.default
    fwd = torch.log_softmax if log else torch.softmax

    def samples(dtype, make):
        out = []
        for shape, dim in [((4, 5), 1), ((3, 4, 2), -1), ((6,), 0), ((2, 3, 4), 0)]:
            y = fwd(make(shape, requires_grad=False), dim).requires_grad_(True)
            out.append((op, (make(shape), y, dim, dtype), {}))
        return out
    return samples


def _gelu_backward(dtype, make):
    op = aten.gelu_backward.default
    return [
        (op, (make((5, 5)), make((5, 5))), {}),
        (op, (make((4, 3)), make((4, 3))), {"approximate": "tanh"}),
        (op, (make(()), make(())), {}),
        (op, (make((3, 2, 2)), make((3, 2, 2), low=-4, high=4)), {"approximate": "none"}),
    ]


def _threshold_backward(dtype, make):
    op = aten.threshold_backward.default
    return [
        (op, (make((5, 5)), make((5, 5)), 0), {}),
        (op, (make((4, 3)), _ints(make, (4, 3), -1, 2), 0.0), {}),   # x == threshold
        (op, (make((6,)), make((6,)), 0.5), {}),
        (op, (make(()), make(()), -0.25), {}),
    ]


def _native_layer_norm_backward(dtype, make):
    op = aten.native_layer_norm_backward.default
    out = []
    for shape, norm, affine, mask in [((4, 6), [6], True, [True, True, True]),
                                      ((2, 3, 4), [3, 4], True, [True, True, True]),
                                      ((5, 3), [3], False, [True, False, False]),
                                      ((3, 4), [4], True, [True, False, True])]:
        x = make(shape)
        w = make(norm) if affine else None
        b = make(norm) if affine else None
        _, mean, rstd = aten.native_layer_norm.default(x.detach(), norm, w, b, 1e-5)
        out.append((op, (make(shape), x, norm, mean, rstd, w, b, mask), {}))
    return out


def _convolution_backward(dtype, make):
    """convolution_backward on the geometries of the gradcheck cases: 1-D/2-D, stride,
    padding, dilation, groups (depthwise), 1x1, transposed with output_padding; every mask."""
    op = aten.convolution_backward.default
    out = []
    for x, w, bias, stride, pad, dil, tr, opad, groups, mask in [
            ((2, 3, 5, 4), (4, 3, 3, 2), True, [1, 1], [1, 0], [1, 1], False, [0, 0], 1, [True] * 3),
            ((1, 4, 7, 6), (6, 2, 3, 3), True, [2, 1], [1, 2], [2, 1], False, [0, 0], 2, [True] * 3),
            ((2, 3, 5, 5), (3, 1, 3, 3), False, [1, 1], [1, 1], [1, 1], False, [0, 0], 3,
             [True, True, False]),
            ((2, 4, 3, 3), (5, 4, 1, 1), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
             [False, True, True]),
            ((2, 4, 3, 4), (4, 3, 3, 3), True, [2, 2], [1, 1], [1, 1], True, [1, 0], 2, [True] * 3),
            ((1, 3, 4, 3), (3, 2, 2, 3), True, [3, 2], [0, 1], [2, 1], True, [2, 1], 1,
             [True, False, True]),
            ((2, 3, 9), (4, 3, 3), True, [2], [1], [2], False, [0], 1, [True] * 3),
            ((2, 4, 5), (4, 1, 3), True, [2], [1], [1], True, [1], 2, [True] * 3)]:
        xt, wt = make(x), make(w)
        y = aten.convolution.default(xt.detach(), wt.detach(), None, stride, pad, dil, tr, opad, groups)
        bs = [y.shape[1]] if bias else None
        out.append((op, (make(tuple(y.shape)), xt, wt, bs, stride, pad, dil, tr, opad, groups, mask), {}))
    return out


def _batch_norm_functional(dtype, make):
    """Train mode ([N, C], [N, C, L], [N, C, H, W]; affine or not) and eval mode."""
    op = aten._native_batch_norm_legit_functional.default
    out = []
    for shape, affine, training in [((4, 3), True, True), ((2, 3, 5), False, True),
                                    ((2, 4, 3, 3), True, True), ((3, 2, 2, 2), True, False)]:
        c = shape[1]
        rm = make((c,), requires_grad=False)
        rv = make((c,), requires_grad=False, low=0.5, high=2.0)
        w = make((c,)) if affine else None
        b = make((c,)) if affine else None
        out.append((op, (make(shape), w, b, rm, rv, training, 0.1, 1e-5), {}))
    return out


def _batch_norm_no_training(dtype, make):
    op = aten._native_batch_norm_legit_no_training.default
    out = []
    for shape, affine in [((4, 3), True), ((2, 3, 4, 2), False), ((2, 2, 5), True)]:
        c = shape[1]
        rm = make((c,), requires_grad=False)
        rv = make((c,), requires_grad=False, low=0.5, high=2.0)
        w = make((c,)) if affine else None
        b = make((c,)) if affine else None
        out.append((op, (make(shape), w, b, rm, rv, 0.1, 1e-5), {}))
    return out


def _max_pool2d_backward(dtype, make):
    """max_pool2d_with_indices_backward with the indices of the forward on the same input."""
    op = aten.max_pool2d_with_indices_backward.default
    out = []
    for shape, k, st, pad, dil, ceil in [((2, 3, 7, 6), [3, 3], [2, 2], [1, 1], [1, 1], False),
                                         ((1, 2, 5, 5), [2, 2], [2, 2], [0, 0], [1, 1], True),
                                         ((3, 6, 7), [2, 3], [1, 2], [1, 0], [2, 1], False)]:
        x = make(shape)
        y, idx = aten.max_pool2d_with_indices.default(x.detach(), k, st, pad, dil, ceil)
        out.append((op, (make(tuple(y.shape)), x, k, st, pad, dil, ceil, idx), {}))
    return out


def _arange(dtype, make):
    op = aten.arange.default
    return [
        (op, (5,), {"dtype": dtype}),
        (op, (7.5,), {"dtype": dtype}),
        (op, (1,), {"dtype": dtype}),
        (op, (6,), {"dtype": torch.int64}),
        (op, (4,), {}),
    ]


def _reshape_alias(dtype, make):
    op = aten._reshape_alias.default
    return [
        (op, (make((4, 6)), [6, 4], [4, 1]), {}),
        (op, (make((2, 3, 4)), [24], [1]), {}),
        (op, (make((2, 6)), [3, 2, 2], [4, 2, 1]), {}),
        (op, (make((6,)), [3, 2, 1], [2, 1, 1]), {}),
    ]


def _upsample(bilinear, backward):
    """upsample_{nearest,bilinear}2d(.default / _backward): output sizes up and down, given
    scales (the float index rounding of a non-integer scale), align_corners both ways."""
    def samples(dtype, make):
        out = []
        cases = [((2, 3, 4, 5), [8, 10], None, None), ((1, 2, 5, 3), [7, 4], None, None),
                 ((2, 2, 6, 6), [3, 4], None, None), ((1, 3, 3, 4), [5, 6], 1.7, 1.5),
                 ((1, 1, 4, 4), [1, 7], None, None)]
        for shape, size, sh, sw in cases:
            for ac in ([False, True] if bilinear else [None]):
                extra = (ac,) if bilinear else ()
                if backward:
                    op = (aten.upsample_bilinear2d_backward.default if bilinear
                          else aten.upsample_nearest2d_backward.default)
                    g = make((shape[0], shape[1], size[0], size[1]))
                    out.append((op, (g, size, list(shape)) + extra + (sh, sw), {}))
                else:
                    op = aten.upsample_bilinear2d.default if bilinear else aten.upsample_nearest2d.default
                    out.append((op, (make(shape), size) + extra + (sh, sw), {}))
        return out
    return samples


def _avg_pool2d_backward(dtype, make):
    """avg_pool2d_backward over padding, ceil_mode, count_include_pad, divisor_override."""
    op = aten.avg_pool2d_backward.default
    out = []
    for shape, k, st, pad, ceil, cip, div in [((2, 3, 7, 6), [3, 3], [2, 2], [1, 1], False, True, None),
                                              ((1, 2, 5, 5), [2, 2], [2, 2], [1, 0], True, False, None),
                                              ((3, 6, 7), [2, 3], [1, 2], [1, 1], True, True, None),
                                              ((2, 2, 6, 5), [3, 2], [2, 1], [0, 1], False, False, 5)]:
        x = make(shape)
        y = aten.avg_pool2d.default(x.detach(), k, st, pad, ceil, cip, div)
        out.append((op, (make(tuple(y.shape)), x, k, st, pad, ceil, cip, div), {}))
    return out


def _adaptive_avg_pool2d_backward(dtype, make):
    op = aten._adaptive_avg_pool2d_backward.default
    out = []
    for shape, size in [((2, 3, 7, 6), [3, 4]), ((1, 2, 5, 5), [5, 5]), ((3, 4, 6), [4, 2]),
                        ((2, 2, 3, 3), [1, 1]), ((1, 2, 2, 3), [5, 4])]:
        x = make(shape)
        y = aten._adaptive_avg_pool2d.default(x.detach(), size)
        out.append((op, (make(tuple(y.shape)), x), {}))
    return out


def _group_norm_backward(dtype, make):
    """native_group_norm_backward with the statistics of the forward on the same input."""
    op = aten.native_group_norm_backward.default
    out = []
    # Forward values only (requires_grad=False): torch has no derivative for it, nor aotc a rule.
    for shape, g, affine, mask in [((2, 4, 3, 2), 2, True, [True, True, True]), ((3, 6), 3, True, [True, True, True]),
                                   ((2, 6, 5), 1, True, [True, True, True]), ((1, 4, 2, 2), 4, True, [True, True, True])]:
        x = make(shape, requires_grad=False)
        n, c = shape[0], shape[1]
        hw = x.numel() // (n * c)
        w = make((c,), requires_grad=False) if affine else None
        _, mean, rstd = aten.native_group_norm.default(x.detach(), w, None, n, c, hw, g, 1e-5)
        out.append((op, (make(shape, requires_grad=False), x, mean, rstd, w, n, c, hw, g, mask), {}))
    return out


def _batch_norm_backward(dtype, make):
    """native_batch_norm_backward, train (saved statistics) and eval (running statistics);
    forward values only (aotc has no rule for it; torch's double backward needs every input)."""
    op = aten.native_batch_norm_backward.default
    out = []
    for shape, affine, train in [((4, 3), True, True), ((2, 3, 5), False, True), ((2, 4, 3, 3), True, True),
                                 ((3, 2, 2, 2), True, False), ((2, 3, 4), False, False)]:
        c = shape[1]
        x = make(shape, requires_grad=False)
        rm = make((c,), requires_grad=False)
        rv = make((c,), requires_grad=False, low=0.5, high=2.0)
        w = make((c,), requires_grad=False) if affine else None
        if train:
            _, sm, si = aten.native_batch_norm.default(x.detach(), w, None, rm.clone(), rv.clone(), True, 0.1, 1e-5)
        else:
            sm = si = None
        out.append((op, (make(shape, requires_grad=False), x, w, rm, rv, sm, si, train, 1e-5, [True, affine, True]), {}))
    return out



def _bitwise(op):
    def samples(dtype, make):
        a = torch.tensor([[3, -1, 0], [7, 2, -5]])
        b = torch.tensor([[5, 6, -1], [1, 2, 3]])
        m = torch.tensor([[True, False, True], [False, False, True]])
        scalar = op._overloadname == "Scalar"
        return [
            (op, (a, 6 if scalar else b), {}),
            (op, (a, -3 if scalar else b[:1]), {}),             # broadcast
            (op, (m, True if scalar else m.flip(0)), {}),       # bool
            (op, (torch.tensor(9), 12 if scalar else torch.tensor([1, 8, 15])), {}),
        ]
    return samples


def _copy(dtype, make):
    # torch has no derivative for aten::copy (its gradient is checked through the zoo's
    # models); the samples check the values.
    op = aten.copy.default
    other = torch.float64 if dtype == torch.float32 else torch.float32

    def m(shape):
        return make(shape, requires_grad=False)
    return [
        (op, (m((3, 4)), m((3, 4))), {}),
        (op, (m((3, 4)), m((4,))), {}),                         # broadcast
        (op, (m((2, 3)), m((2, 3)).to(other)), {}),             # cast
        (op, (m(()), m(())), {}),
        (op, (m((2, 3)), torch.tensor([[1, -2, 3], [4, 5, -6]])), {}),  # i64 source
    ]


def _chunk(dtype, make):
    op = aten.chunk.default
    return [
        (op, (make((6, 4)), 3), {}),
        (op, (make((5, 4)), 2, 1), {}),
        (op, (make((7, 3)), 3), {}),            # ceil(7/3) = 3: pieces 3, 3, 1
        (op, (make((2, 5)), 4, -1), {}),        # 4 chunks asked, 3 given (2, 2, 1)
    ]


def _clamp_max(dtype, make):
    op = aten.clamp_max.default
    return [
        (op, (_ints(make, (5, 5)), 1), {}),     # ties on the bound
        (op, (make((3, 4, 2)), 0.25), {}),
        (op, (make(()), -1.5), {}),
        (op, (make((6,)), float("nan")), {}),
    ]


def _index(dtype, make):
    op = aten.index.Tensor
    i = torch.tensor([2, 0, -1, 2])
    j = torch.tensor([[1], [0]])
    return [
        (op, (make((4, 5)), [i]), {}),
        (op, (make((4, 5, 3)), [None, torch.tensor([4, 0])]), {}),
        (op, (make((4, 5, 3)), [j, torch.tensor([1, 4, -2])]), {}),          # broadcast [2, 3]
        (op, (make((4, 5, 3)), [torch.tensor([0, 3]), None, torch.tensor([2, 1])]), {}),  # not adjacent
        (op, (make((3, 4, 5, 2)), [None, torch.tensor([1, 1]), torch.tensor([0, 4])]), {}),
        (op, (make((5,)), [torch.tensor(3)]), {}),                            # 0-d index
        (op, (make((6, 2)), [torch.tensor([5, 1, 1], dtype=torch.int32)]), {}),
    ]


def _index_put(dtype, make):
    op = aten.index_put.default
    return [
        (op, (make((4, 5)), [torch.tensor([2, 0, -1])], make((3, 5))), {}),
        (op, (make((4, 5)), [torch.tensor([2, 0, 2])], make((5,)), True), {}),   # accumulate dups
        (op, (make((4, 5, 3)), [torch.tensor([0, 3]), None, torch.tensor([2, 1])], make((2, 5))), {}),
        (op, (make((4, 5, 3)), [None, torch.tensor([[4], [0]]), torch.tensor([1, 2])], make((4, 2, 2)),
              True), {}),
        (op, (make((6,)), [torch.tensor([5, 1])], make(())), {}),
    ]


def _sdpa(dtype, make):
    op = aten.scaled_dot_product_attention.default
    mask = torch.tensor([[True, True, False, True], [True, False, False, False], [True, True, True, True]])
    full = mask.clone()
    full[1] = False                                              # a fully masked row: zeros
    additive = make((3, 4), requires_grad=False)
    with torch.no_grad():
        additive[1] = float("-inf")           # fully masked by an additive mask: no NaN gradient
    make = _attention_make(make)
    return [
        (op, (make((2, 3, 4, 8)), make((2, 3, 5, 8)), make((2, 3, 5, 6))), {}),
        (op, (make((2, 2, 5, 8)), make((2, 2, 5, 8)), make((2, 2, 5, 8))), {"is_causal": True}),
        (op, (make((1, 2, 3, 4)), make((1, 2, 4, 4)), make((1, 2, 4, 4)), mask), {}),
        (op, (make((1, 2, 3, 4)), make((1, 2, 4, 4)), make((1, 2, 4, 4)), full), {}),
        (op, (make((2, 3, 4)), make((2, 5, 4)), make((2, 5, 3)), make((3, 5), requires_grad=False)),
         {"scale": 0.3}),                                        # additive mask, 3-D
        (op, (make((1, 4, 3, 8)), make((1, 2, 3, 8)), make((1, 2, 3, 8))),
         {"is_causal": True, "enable_gqa": True}),               # grouped-query attention
        (op, (make((1, 2, 3, 4)), make((1, 2, 4, 4)), make((1, 2, 4, 4)), additive), {}),
    ]


def _attention_make(make):
    """Inputs in [-1.5, 1.5]: make's default range (about [-9, 9]) saturates the softmax, whose
    gradients then break the float32 bound in torch itself (skipped as ill-conditioned)."""
    return lambda shape, **kw: make(shape, low=-1.5, high=1.5, **kw)


def _safe_softmax(dtype, make):
    """torch's _safe_softmax: rows whose every value is -inf give 0 and no NaN gradient."""
    op = aten._safe_softmax.default
    x = make((3, 5))
    with torch.no_grad():
        x[1] = float("-inf")
    y = make((2, 3, 4))
    with torch.no_grad():
        y[0, :, 2] = float("-inf")                               # a masked column along dim 1
        y[1, 0, 0] = float("-inf")                               # one -inf in a live row
    return [(op, (x, 1), {}), (op, (y, 1), {}), (op, (make((4, 6)), -1), {}),
            (op, (make((2, 5)), 0), {"dtype": torch.float64})]


def _flash(dtype, make):
    """_scaled_dot_product_flash_attention_for_cpu: 4-D, one head size, float masks (q's dtype,
    2-D or 4-D, with is_causal too); logsumexp has no gradient in torch."""
    op = aten._scaled_dot_product_flash_attention_for_cpu.default
    m = _attention_make(make)
    full = make((3, 4), requires_grad=False)
    with torch.no_grad():
        full[1] = float("-inf")                                  # a fully masked row: 0 and 0
    return [
        (op, (m((2, 3, 4, 8)), m((2, 3, 5, 8)), m((2, 3, 5, 8))), {}),
        (op, (m((2, 2, 5, 8)), m((2, 2, 5, 8)), m((2, 2, 5, 8))), {"is_causal": True}),
        (op, (m((1, 2, 3, 4)), m((1, 2, 6, 4)), m((1, 2, 6, 4))), {"is_causal": True, "scale": 0.3}),
        (op, (m((1, 2, 3, 4)), m((1, 2, 4, 4)), m((1, 2, 4, 4))), {"attn_mask": full}),
        (op, (m((1, 2, 3, 4)), m((1, 2, 4, 4)), m((1, 2, 4, 4))),
         {"attn_mask": make((1, 1, 3, 4), requires_grad=False), "is_causal": True}),
        (op, (m((1, 4, 3, 8)), m((1, 2, 3, 8)), m((1, 2, 3, 8))), {"is_causal": True}),  # GQA
    ]


def _random(target):
    """Samples of a random op; its values come from REPLAY (aotc's Philox stream), not torch's
    generator."""
    op = overload_of(target)

    def samples(dtype, make):
        if target == "aten.rand.default":
            return [(op, ([3, 4],), {"dtype": dtype}), (op, ([2, 1, 5],), {"dtype": dtype}),
                    (op, ([],), {"dtype": dtype})]
        if target == "aten.randperm.default":
            return [(op, (7,), {}), (op, (1,), {}), (op, (0,), {}), (op, (5,), {"dtype": dtype})]
        if target == "aten.randn.default":
            return [(op, ([3, 4],), {"dtype": dtype}), (op, ([5],), {"dtype": dtype}), (op, ([],), {"dtype": dtype})]
        if target == "aten.randn_like.default":
            return [(op, (make((4, 5), requires_grad=False),), {}), (op, (make((), requires_grad=False),), {})]
        if target == "aten.rand_like.default":
            return [(op, (make((4, 5), requires_grad=False),), {}), (op, (make((), requires_grad=False),), {})]
        if target == "aten.bernoulli.default":
            return [(op, (make((6, 7), low=0.0, high=1.0, requires_grad=False),), {})]
        if target == "aten.bernoulli.p":
            return [(op, (make((5, 6), requires_grad=False), 0.3), {}), (op, (make((8,), requires_grad=False), 0.75), {})]
        # native_dropout / dropout: drawing, eval mode, p = 0 and p = 1.
        s = [(op, (make((6, 8)), 0.25, True), {}), (op, (make((3, 4, 5)), 0.5, True), {}),
             (op, (make((4, 4)), 0.5, False), {}), (op, (make((4, 4)), 0.0, True), {}),
             (op, (make((4, 4)), 1.0, True), {})]
        if target == "aten.native_dropout.default":
            s.append((op, (make((5, 3)), 0.1, None), {}))   # train=None means training
        return s
    return samples


def _extremum_nan(op):
    """amax/amin over rows that hold a NaN: eager's gradient is NaN over such a row (0 * inf in
    scale_grad_by_count), ties elsewhere split it evenly."""
    def samples(dtype, make):
        x = _ints(make, (4, 5))
        with torch.no_grad():
            x[1, 2] = float("nan")
            x[3, 0] = float("nan")
        y = _ints(make, (3, 4, 2))
        with torch.no_grad():
            y[0, 1, 1] = float("nan")
        return [(op, (x, [1]), {}), (op, (x, [0], True), {}), (op, (y, [-1, 0]), {})]
    return samples


def _isnan(dtype, make):
    """isnan on NaN, +-inf, -0.0 and ordinary values (OpInfo's samples hold no NaN), 0-d and
    broadcast-free shapes, and on integer and bool tensors (always false)."""
    x = make((3, 5), requires_grad=False)
    with torch.no_grad():
        x[0, 1] = float("nan")
        x[1, 3] = float("inf")
        x[2, 0] = float("-inf")
        x[2, 4] = -0.0
        x[1, 1] = float("nan")
    nan0 = torch.tensor(float("nan"), dtype=dtype)
    return [(aten.isnan.default, (x,), {}), (aten.isnan.default, (nan0,), {}),
            (aten.isnan.default, (torch.arange(-3, 4),), {}),
            (aten.isnan.default, (torch.tensor([True, False]),), {})]


def _unary_edges(op, low, high, outside):
    """A unary float function at the edges OpInfo's samples avoid: NaN, +-inf, +-0.0, the ends of
    its domain [low, high] and `outside` (values outside it: NaN in torch), with gradients; and,
    with the float32 samples, an integer tensor (promoted to the default dtype, float32: judged
    with float32's tolerance)."""
    def samples(dtype, make):
        x = make((3, 6), low=low, high=high)
        with torch.no_grad():
            edges = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, low, high] + list(outside)
            for k, v in enumerate(edges[:18]):
                x.view(-1)[k] = v
        ints = [(op, (torch.arange(1, 4),), {})] if dtype == torch.float32 else []
        return [(op, (x,), {})] + ints
    return samples


def _rounding(op):
    """A rounding function on NaN, +-inf, +-0.0, the halves (round: to even) and integral values,
    with gradients (zero), and an integer tensor (the identity)."""
    def samples(dtype, make):
        v = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5,
             2.0, -3.0, 0.49999997, 1e20, -7.25, 3.75, -0.1]
        x = torch.tensor(v, dtype=dtype).reshape(3, 6).requires_grad_()
        ints = [(op, (torch.arange(-3, 4),), {})] if dtype == torch.float32 else []
        return [(op, (x,), {})] + ints
    return samples


def _modulo(tensor_op, scalar_op):
    """fmod / remainder with every sign combination, a zero and an infinite divisor (NaN and
    self), NaN operands, and Python-number divisors."""
    def samples(dtype, make):
        a = torch.tensor([5.5, -5.5, 5.5, -5.5, 3.0, 1.0, float("nan"), 2.0, -0.0, 7.0, 0.25, -1e-3],
                         dtype=dtype).requires_grad_()
        b = torch.tensor([2.0, 2.0, -2.0, -2.0, 0.0, float("inf"), 1.0, float("nan"), 3.0, 7.0, -0.75, 0.5],
                         dtype=dtype).requires_grad_()
        if tensor_op is not None:
            return [(tensor_op, (a, b), {})]
        x = make((3, 4), low=-4, high=4)
        return [(scalar_op, (x, 1.5), {}), (scalar_op, (x, -0.75), {})]
    return samples


def _isinf(dtype, make):
    """isinf on NaN, +-inf, -0.0, the largest finite values and ordinary ones; integer and bool
    tensors (always false)."""
    x = make((3, 5), requires_grad=False)
    with torch.no_grad():
        for k, v in enumerate([float("nan"), float("inf"), float("-inf"), -0.0, torch.finfo(dtype).max,
                               -torch.finfo(dtype).max]):
            x.view(-1)[k] = v
    return [(aten.isinf.default, (x,), {}), (aten.isinf.default, (torch.arange(-3, 4),), {}),
            (aten.isinf.default, (torch.tensor([True, False]),), {})]


def _bitwise_not(dtype, make):
    """~x on i64 (with its extremes) and bool: the dtypes aotc computes on (i32 / u8 are index-only,
    refused by name; OpInfo's samples are int8 / int16 ones)."""
    i64 = torch.tensor([0, 1, -1, 5, -7, 2**63 - 1, -2**63])
    return [(aten.bitwise_not.default, (i64,), {}),
            (aten.bitwise_not.default, (torch.tensor([True, False]),), {})]


def _argmin(dtype, make):
    """argmin with ties (the first wins), NaN (the first NaN wins), -inf, integer extremes,
    dim=None and keepdim (bool is refused, as torch)."""
    x = torch.tensor([[3.0, -1.0, -1.0, 2.0], [float("nan"), 0.0, float("nan"), -5.0],
                      [float("-inf"), 1.0, float("-inf"), 0.0]], dtype=dtype)
    ints = torch.tensor([[5, -2**63, 3], [2**63 - 1, 0, 0]])
    return [(aten.argmin.default, (x, 1), {}), (aten.argmin.default, (x,), {}),
            (aten.argmin.default, (x, 0, True), {}), (aten.argmin.default, (ints, 1), {}),
            (aten.argmin.default, (ints,), {})]


def _clamp_tensor(dtype, make):
    """clamp with tensor bounds: ties with either bound (integer values), min == max, min > max,
    NaN in self or a bound, one bound only, broadcasting bounds (torch 2.15's tie rule)."""
    nan = float("nan")
    op = aten.clamp.Tensor
    t = lambda v: torch.tensor(v, dtype=dtype).requires_grad_()  # noqa: E731
    x = t([0.0, 1.0, 2.0, 3.0, nan, 1.5, 1.5, 1.0, 2.0, 1.5, 1.0])
    lo = t([1.0, 1.0, 1.0, 1.0, 1.0, nan, 1.0, 2.0, 2.0, 2.0, 1.0])
    hi = t([2.0, 2.0, 2.0, 2.0, 2.0, 2.0, nan, 1.0, 1.0, 1.0, 1.0])
    return [
        (op, (x, lo, hi), {}),
        (op, (x, lo, None), {}),
        (op, (x, None, hi), {}),
        (op, (_ints(make, (3, 4)), _ints(make, (4,)), _ints(make, (3, 1))), {}),
        (op, (_ints(make, (2, 3)), None, _ints(make, (2, 3))), {}),
        (op, (make((2, 3)), make((1, 3)), None), {}),
    ]


def _div_mode(op, scalar):
    """div with rounding_mode 'trunc' / 'floor': every sign combination, exact and inexact
    quotients, a zero divisor (+-inf, NaN), -0.0 results, NaN; None for comparison."""
    def samples(dtype, make):
        nan, inf = float("nan"), float("inf")
        a = torch.tensor([7.0, -7.0, 7.0, -7.0, 6.0, -6.0, 1.0, -1.0, 0.0, nan, 5.0, 0.3, -0.0, 1e10, inf],
                         dtype=dtype).requires_grad_()
        b = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0, 0.0, 0.0, 1.0, 0.1, 0.1, 4.0, 3.0, 2.0],
                         dtype=dtype).requires_grad_()
        s = []
        for mode in ("trunc", "floor"):
            if scalar:
                for other in (2.0, -0.75, 3):
                    s.append((op, (a, other), {"rounding_mode": mode}))
            else:
                s.append((op, (a, b), {"rounding_mode": mode}))
                s.append((op, (make((3, 4), low=-5, high=5), make((4,), low=0.5, high=2)), {"rounding_mode": mode}))
        return s
    return samples


def _pow_scalar(dtype, make):
    """pow with a Python-number base: float and int bases, base 0 with positive, zero and
    negative exponents, a negative base with integral exponents, an integer exponent tensor
    (an integer base with one is refused: integer pow)."""
    op = aten.pow.Scalar
    e0 = torch.tensor([0.0, 1.0, -1.0, 2.5], dtype=dtype).requires_grad_()
    return [
        (op, (2.0, make((3, 4), low=-2, high=2)), {}),
        (op, (0.5, make((5,), low=-3, high=3)), {}),
        (op, (3, make((2, 3), low=-1, high=1)), {}),
        (op, (0.0, e0), {}),
        (op, (-2.0, _ints(make, (4,))), {}),
        (op, (1.5, torch.tensor([0, 2, -1])), {}),
    ]


def _extremum_dim(op):
    """max.dim / min.dim with ties (the first index takes the gradient), NaN (the first NaN and
    its index win), +-inf, keepdim, negative dims, a 0-d input, integer and bool inputs."""
    def samples(dtype, make):
        nan, inf = float("nan"), float("inf")
        x = torch.tensor([[3.0, -1.0, 3.0, -1.0], [nan, 0.0, nan, -5.0], [-inf, 1.0, inf, 1.0]],
                         dtype=dtype).requires_grad_()
        return [(op, (x, 1), {}), (op, (x, 0, True), {}), (op, (x, -1, True), {}),
                (op, (_ints(make, (3, 4, 2)), 1), {}), (op, (make(()), 0), {}),
                (op, (torch.tensor([[5, -2**63, 3], [2**63 - 1, 0, 0]]), 1), {}),
                (op, (torch.tensor([[True, False], [False, False]]), 1), {})]
    return samples


def _prod(op):
    """prod over slices with no zero, one zero and two zeros (prod_backward's three cases), NaN,
    negative values, the dtype argument, integer and bool inputs."""
    def samples(dtype, make):
        x = torch.tensor([[1.5, -2.0, 0.5, 3.0], [0.0, 2.0, -1.5, 0.5], [0.0, 1.0, 0.0, 2.0],
                          [float("nan"), 1.0, 2.0, 0.5]], dtype=dtype).requires_grad_()
        ints = torch.tensor([[2, -3, 4], [0, 5, 7]])
        if op is aten.prod.default:
            return [(op, (x,), {}), (op, (x[1:2].detach().requires_grad_(),), {}),
                    (op, (x[2:3].detach().requires_grad_(),), {}), (op, (make((2, 3), low=0.5, high=1.5),), {}),
                    (op, (x,), {"dtype": torch.float64}), (op, (ints,), {}),
                    (op, (torch.tensor([True, False]),), {})]
        return [(op, (x, 1), {}), (op, (x, 0, True), {}), (op, (x, -1), {"dtype": torch.float64}),
                (op, (make((2, 3, 2), low=-1.5, high=1.5), 1), {}), (op, (ints, 1), {}), (op, (make(()), 0), {})]
    return samples


def _empty(op):
    """empty / empty_strided: aotc's values are zeros (REPLAY); the shapes and dtypes are
    torch's."""
    def samples(dtype, make):
        if op is aten.empty_strided.default:
            return [(op, ([2, 3], [3, 1]), {"dtype": dtype}), (op, ([4], [1]), {"dtype": torch.int64}),
                    (op, ([], []), {"dtype": dtype})]
        return [(op, ([3, 4],), {"dtype": dtype}), (op, ([2, 0, 3],), {"dtype": dtype}),
                (op, ([5],), {"dtype": torch.bool})]
    return samples


def _pads(op):
    """reflection / replication padding with a batch dim and without, asymmetric, zero and (for
    replication) negative pads."""
    rank = {"1d": 1, "2d": 2, "3d": 3}[op.__name__.split(".")[0][-2:]]
    reflect = "reflection" in op.__name__

    def samples(dtype, make):
        s = []
        for batch in ((2, 3), (3,)):
            shape = batch + (4, 5, 3)[:rank]
            pads = [2, 1, 0, 3, 1, 2][:2 * rank]
            s.append((op, (make(shape), pads), {}))
        if not reflect:
            s.append((op, (make((2,) + (4, 5, 3)[:rank]), [-1, 3, 2, -2, 0, 1][:2 * rank]), {}))
            s.append((op, (make((1,) + (1, 1, 1)[:rank]), [2, 3, 1, 1, 2, 0][:2 * rank]), {}))
        return s
    return samples


def _var_dim(dtype, make):
    """var.dim (torch.export writes var.correction; a one-node graph, TRACE): unbiased and biased,
    dims None / one / several / negative, keepdim, a single-element reduction (N - 1 = 0)."""
    op = aten.var.dim
    return [(op, (make((3, 4)), [1]), {}), (op, (make((3, 4)), [1], False), {}),
            (op, (make((2, 3, 4)), [0, -1], True, True), {}), (op, (make((2, 3)), None), {}),
            (op, (make((4, 1)), [1], True), {})]


def _embedding_dense_backward(dtype, make):
    """embedding_dense_backward: repeated indices (the rows sum), padding_idx hit and -1 (none),
    scale_grad_by_freq, 2-D indices, an unused weight row."""
    op = aten.embedding_dense_backward.default
    ix1 = torch.tensor([0, 2, 2, 5, 2, 0])
    ix2 = torch.tensor([[1, 3, 3], [0, 1, 3]])
    return [(op, (make((6, 4)), ix1, 7, -1, False), {}), (op, (make((6, 4)), ix1, 6, 2, False), {}),
            (op, (make((6, 3)), ix1, 6, -1, True), {}), (op, (make((2, 3, 5)), ix2, 4, 3, True), {}),
            (op, (make((2, 3, 5)), ix2, 5, 0, False), {})]


def _batch_norm_no_stats(dtype, make):
    """_native_batch_norm_legit.no_stats: affine or not, [N, C], [N, C, L], [N, C, H, W]."""
    op = aten._native_batch_norm_legit.no_stats
    return [(op, (make((4, 3)), make((3,)), make((3,)), True, 0.1, 1e-5), {}),
            (op, (make((2, 3, 5)), None, None, True, 0.1, 1e-3), {}),
            (op, (make((2, 4, 3, 3)), make((4,)), None, True, 0.5, 1e-5), {})]


def _scatter_reduce(dtype, make):
    """scatter_reduce: every reduce with and without self, repeated indices, ties with self and
    between sources (amax / amin split the gradient), zeros in self and src (prod: one zero in a
    slice and two), NaN, integer tensors."""
    op = aten.scatter_reduce.two
    t = lambda v: torch.tensor(v, dtype=dtype).requires_grad_()  # noqa: E731
    self_ = t([[1.0, 2.0, 0.0, 4.0], [3.0, 0.0, 1.0, 2.0], [2.0, 2.0, 5.0, -1.0]])
    src = t([[2.0, 0.0, 1.0, 4.0], [3.0, 0.0, 5.0, 2.0]])
    idx = torch.tensor([[0, 0, 2, 1], [0, 1, 2, 1]])
    nan_src = t([[float("nan"), 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    reds = ("sum", "prod", "mean", "amax", "amin")
    # The first 12 per dtype are kept (gen.py CAP): every reduce with self along dim 0, every one
    # without self along dim 1, then NaN and integer cases.
    s = [(op, (self_, 0, idx, src, red), {}) for red in reds]
    s += [(op, (self_, 1, torch.tensor([[3, 3], [0, 1], [2, 2]]), t([[0.0, 2.0], [1.0, 1.0], [0.0, 0.0]]), red),
           {"include_self": False}) for red in reds]
    s.append((op, (self_, 0, idx, nan_src, "amax"), {}))
    if dtype == torch.float32:
        s.append((op, (torch.tensor([[1, 2], [3, 4]]), 0, torch.tensor([[1, 0], [1, 1]]),
                       torch.tensor([[5, -6], [7, 8]]), "prod"), {"include_self": False}))
    else:
        s.append((op, (self_, 0, idx, nan_src, "amin"), {"include_self": False}))
    return s


def _scatter(op):
    """scatter (overwrite): repeated indices along dim (the last write wins, as torch's CPU
    loop), 0-d, negative dim; the value overload with int and float. (A src larger than index
    has no gradient in eager: ScatterBackward returns index's shape, which autograd refuses.)"""
    def samples(dtype, make):
        idx = torch.tensor([[0, 2, 0], [1, 1, 1]])
        if op is aten.scatter.value:
            return [(op, (make((2, 4)), 1, idx, 2.5), {}), (op, (make((3, 3)), 0, idx, -1), {}),
                    (op, (make(()), 0, torch.tensor(0), 7.0), {})]
        return [(op, (make((2, 4)), 1, idx, make((2, 3))), {}), (op, (make((3, 3)), 0, idx, make((2, 3))), {}),
                (op, (make((2, 5)), -1, idx, make((2, 3))), {}), (op, (make(()), 0, torch.tensor(0), make(())), {})]
    return samples


def _sort_like(op):
    """sort / topk: ties (stable: input order), NaN (last ascending, first descending), +-inf,
    -0.0 against 0.0, negative dims, integers, 0-d, k = 0 and k = n."""
    def samples(dtype, make):
        nan, inf = float("nan"), float("inf")
        x = torch.tensor([[3.0, -1.0, nan, 3.0, -inf, 0.0], [-0.0, 0.0, 2.0, nan, inf, 2.0]],
                         dtype=dtype).requires_grad_()
        ints = torch.tensor([[5, -2, 5, 0], [1, 1, -7, 3]])
        if op is aten.topk.default:
            # Without ties: eager's order among equal values is libstdc++'s partial_sort /
            # nth_element order (torch does not specify it); aotc's is the lowest index first.
            x = torch.tensor([[3.0, -1.0, nan, 2.5, -inf, 0.0], [-0.5, 0.25, 2.0, nan, inf, 1.5]],
                             dtype=dtype).requires_grad_()
            ints = torch.tensor([[5, -2, 4, 0], [1, 2, -7, 3]])
            return [(op, (x, 3), {}), (op, (x, 2, 1, False), {}), (op, (x, 1, 0), {}), (op, (x, 0), {}),
                    (op, (x, 6, -1, True, True), {}), (op, (ints, 2), {}), (op, (make(()), 1), {}),
                    (op, (make((4, 5)), 3, 0, False), {})]
        if op is aten.sort.stable:
            return [(op, (x,), {"stable": True}), (op, (x,), {"stable": True, "dim": 0, "descending": True}),
                    (op, (ints,), {"stable": None, "dim": -1})]
        return [(op, (x,), {}), (op, (x, 1, True), {}), (op, (x, 0), {}), (op, (ints, -1, True), {}),
                (op, (make(()),), {}), (op, (_ints(make, (3, 7)), 1), {}), (op, (make((2, 1, 3)), 1), {})]
    return samples


def _distance(op):
    """cdist / pdist with p = 0, 0.5, 1, 2, 3, inf over points that coincide (zero distances),
    share coordinates (zero differences) and tie in |difference| (p = inf splits nothing)."""
    def samples(dtype, make):
        t = lambda v: torch.tensor(v, dtype=dtype).requires_grad_()  # noqa: E731
        a = [[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [2.0, -2.0]]
        b = [[0.0, 0.0], [1.0, 1.0], [3.0, 1.0]]
        if op is aten._cdist_forward.default:
            s = [(op, (t(a), t(b), p, None), {}) for p in (0.0, 0.5, 1.0, 2.0, 3.0, float("inf"))]
            return s + [(op, (make((2, 3, 4)), make((1, 5, 4)), 2.0, None), {}),
                        (op, (make((3, 2)), make((2, 4, 2)), 1.5, 1), {})]
        return [(op, (t(a), p), {}) for p in (0.0, 0.5, 1.0, 2.0, 3.0, float("inf"))] + \
            [(op, (make((6, 3)), 2.0), {}), (op, (make((1, 3)), 2.0), {})]
    return samples


def _norm_stats(op):
    """native_layer_norm / native_group_norm called directly, so every output (mean and rstd too)
    gets a cotangent: eager ignores layer norm's and passes group norm's (OpInfo's wrong cases)."""
    def samples(dtype, make):
        if op is aten.native_layer_norm.default:
            return [(op, (make((3, 4)), [4], make((4,)), make((4,)), 1e-5), {}),
                    (op, (make((2, 3, 4)), [3, 4], None, None, 1e-5), {})]
        return [(op, (make((2, 4, 3)), make((4,)), make((4,)), 2, 4, 3, 2, 1e-5), {}),
                (op, (make((3, 6)), None, None, 3, 6, 1, 3, 1e-5), {})]
    return samples


def _conv_transposed_outpad(dtype, make):
    """Transposed convolutions whose output_padding reaches the stride (legal below the
    dilation; OpInfo's wrong case): 2-D and 1-D, with bias and groups."""
    op = aten.convolution.default
    return [(op, (make((2, 3, 4, 5)), make((3, 2, 3, 2)), make((2,)), [3, 2], [1, 0], [4, 4], True, [2, 3], 1), {}),
            (op, (make((1, 4, 6)), make((4, 1, 2)), None, [1], [0], [3], True, [2], 2), {})]


def _col2im(dtype, make):
    """col2im (F.fold; no OpInfo): overlapping blocks (stride < kernel), padding, dilation,
    rectangular kernels and an unbatched input."""
    op = aten.col2im.default
    return [(op, (make((2, 3 * 2 * 2, 12)), [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]), {}),
            (op, (make((1, 2 * 3 * 2, 6)), [5, 4], [3, 2], [1, 2], [1, 1], [2, 2]), {}),
            (op, (make((4 * 2 * 1, 12)), [3, 4], [2, 1], [2, 1], [1, 0], [1, 1]), {}),
            (op, (make((2, 1 * 3 * 3, 4)), [5, 5], [3, 3], [1, 1], [1, 1], [3, 3]), {})]


def _masked_scatter(dtype, make):
    """masked_scatter: a mask broadcast over self, more source elements than true ones, a
    sparse mask over 37 elements (several scan steps), all false, all true."""
    op = aten.masked_scatter.default
    g = torch.Generator().manual_seed(3)
    sparse = torch.rand(37, generator=g) < 0.3
    return [(op, (make((3, 4)), torch.tensor([True, False, True, True]), make((20,))), {}),
            (op, (make((37,)), sparse, make((37,))), {}),
            (op, (make((2, 3)), torch.zeros(2, 3, dtype=torch.bool), make((2,))), {}),
            (op, (make((2, 3)), torch.ones(2, 3, dtype=torch.bool), make((2, 3))), {})]


def _pool3d(op):
    """3-D pools: ties across depth and within a plane (max: the first in (d, h, w) order),
    NaN, padding with ceil_mode, count_include_pad off, divisor_override, dilation, unbatched."""
    def samples(dtype, make):
        if op is aten.max_pool3d_with_indices.default:
            x = _ints(make, (1, 2, 4, 4, 5), low=0, high=3)
            nan = make((1, 1, 3, 4, 4)).detach()
            nan[0, 0, 1, 2, 2] = float("nan")
            nan[0, 0, 2, 0, 1] = float("nan")
            return [(op, (x, [2, 2, 2]), {}), (op, (x, [3, 2, 3], [1, 2, 1], [1, 1, 1], [1, 1, 1], True), {}),
                    (op, (nan.requires_grad_(), [2, 3, 3], [1, 1, 1]), {}),
                    (op, (make((2, 5, 5, 6)), [2, 2, 2], [2, 2, 2], [0, 1, 1], [2, 1, 2]), {})]
        if op is aten.avg_pool3d.default:
            x = make((2, 2, 5, 4, 6))
            return [(op, (x, [2, 2, 3], [2, 1, 2], [1, 0, 1], True, False), {}),
                    (op, (x, [3, 3, 3], [2, 2, 2], [1, 1, 1], False, True, 5), {}),
                    (op, (make((3, 4, 4, 4)), [2, 2, 2]), {})]
        return [(op, (make((2, 3, 5, 7, 6)), [2, 3, 4]), {}), (op, (make((3, 4, 5, 6)), [4, 1, 6]), {})]
    return samples


def _max_pool2d_nan(dtype, make):
    """max_pool2d with two NaNs in one window (ATen reports the last) and ties (the first)."""
    op = aten.max_pool2d_with_indices.default
    x = make((1, 2, 4, 6)).detach()
    x[0, 0, 0, 1] = float("nan")
    x[0, 0, 1, 2] = float("nan")
    return [(op, (x.requires_grad_(), [2, 3]), {}), (op, (_ints(make, (2, 3, 5, 5), low=0, high=2), [3, 3], [2, 2], [1, 1]), {})]


def _grid_sampler(dtype, make):
    """grid_sampler_2d, small (the fixtures' size budget): bilinear and nearest, every padding
    mode, both align_corners, grid points beyond [-1, 1] (padding and reflection at work).
    OpInfo's samples are larger and include bicubic, which aotc refuses (not implemented yet)."""
    op = aten.grid_sampler_2d.default
    s = []
    for mode, pad, align in [(0, 0, False), (0, 1, True), (0, 2, False), (0, 2, True), (1, 0, True), (1, 2, False)]:
        s.append((op, (make((2, 2, 4, 5)), make((2, 3, 3, 2), low=-1.6, high=1.6), mode, pad, align), {}))
    g = make((1, 2, 2, 2), low=-0.9, high=0.9).detach()
    g[0, 0, 1, 0] = float("nan")  # reads nothing (ATen maps a NaN coordinate to -100)
    s.append((op, (make((1, 2, 3, 3)), g.requires_grad_(), 0, 0, False), {}))
    return s


def _embedding_bag(dtype, make):
    """_embedding_bag: every mode, an empty bag, repeated indices, padding_idx, per-sample
    weights, include_last_offset, ties in max (integer weights), NaN rows in max (a NaN wins only
    as a bag's first entry, as ATen's `v > max`)."""
    op = aten._embedding_bag.default
    w = make((10, 3))
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    return [(op, (w, idx, torch.tensor([0, 4]), False, 0), {}),
            (op, (w, idx, torch.tensor([0, 3, 3, 6]), False, 1), {}),
            (op, (w, idx, torch.tensor([0, 4, 4]), False, 2), {}),
            (op, (w, idx, torch.tensor([0, 5]), False, 0, False, make((8,))), {}),
            (op, (w, idx, torch.tensor([0, 2, 8]), False, 1, False, None, True, 4), {}),
            (op, (w, idx, torch.tensor([0, 4]), False, 0, False, None, False, 2), {}),
            (op, (_ints(make, (6, 2), low=0, high=2), torch.tensor([0, 1, 2, 3, 4, 5, 0]), torch.tensor([0, 4]), False, 2), {}),
            (op, (torch.tensor([[1.0, float("nan")], [float("nan"), 2.0], [-1.0, 0.5]], dtype=dtype).requires_grad_(),
                  torch.tensor([0, 1, 2, 1, 0]), torch.tensor([0, 2, 3]), False, 2), {})]


def overload_of(target):
    ns, name, ov = target.split(".")
    return getattr(getattr(getattr(torch.ops, ns), name), ov)


def _replay(target):
    """REPLAY[target](graph dtype) -> a function computing the op as aotc draws it: stream 0 of
    seed 0 at offset 0 (a one-node graph, `aotc run`'s default rng_state), with the uniform of
    the graph's dtype (an f32 sample's float64 reference reuses the f32 draw); the formulas of
    lib/Decompose/Random.cpp (docs/randomness.md)."""
    import philox

    def for_dtype(graph_dtype):
        name = "float32" if graph_dtype == torch.float32 else "float64"

        def u(shape):
            return torch.from_numpy(philox.uniform(0, 0, tuple(shape), name))

        def normal(shape):
            # Box-Muller of lib/Decompose/Random.cpp, in the graph's dtype as aotc computes it.
            v = u([2] + list(shape))
            return torch.sqrt(torch.log(1.0 - v[0]) * -2.0) * torch.cos(v[1] * 6.283185307179586)

        def dropout(x, p, train=True):
            if train is False or p == 0.0:
                return x.clone(), torch.ones(x.shape, dtype=torch.bool)
            if p == 1.0:
                return x * 0.0, torch.zeros(x.shape, dtype=torch.bool)
            mask = u(x.shape) > p
            return mask * x * (1.0 / (1.0 - p)), mask

        return {
            "aten.rand.default": lambda size, dtype=None, **kw: u(size).to(dtype or torch.float32),
            "aten.rand_like.default": lambda x, **kw: u(x.shape).to(x.dtype),
            "aten.randn.default": lambda size, dtype=None, **kw: normal(size).to(dtype or torch.float32),
            "aten.randperm.default": lambda n, dtype=None, **kw: torch.argsort(
                torch.from_numpy(philox.uniform(0, 0, (n,), "float64")), stable=True).to(dtype or torch.int64),
            "aten.randn_like.default": lambda x, **kw: normal(x.shape).to(x.dtype),
            "aten.bernoulli.default": lambda x, **kw: (u(x.shape).to(x.dtype) < x).to(x.dtype),
            "aten.bernoulli.p": lambda x, p, **kw: (u(x.shape) < p).to(x.dtype),
            "aten.native_dropout.default": dropout,
            "aten.dropout.default": lambda x, p, train: dropout(x, p, train)[0],
        }[target]
    return for_dtype


RANDOM = ["aten.rand.default", "aten.rand_like.default", "aten.randn.default", "aten.randn_like.default",
          "aten.randperm.default", "aten.bernoulli.default", "aten.bernoulli.p",
          "aten.native_dropout.default", "aten.dropout.default"]
# Random ops: target -> (graph dtype -> the function giving the sample's values).
REPLAY = {t: _replay(t) for t in RANDOM}
# empty / empty_strided: uninitialized in torch, zeros in aotc (docs/stage-decompose.md).
REPLAY.update({t: (lambda graph_dtype: (lambda size, *rest, dtype=None, **kw: torch.zeros(size, dtype=dtype)))
               for t in ("aten.empty.memory_format", "aten.empty_strided.default")})

EXTRA = {
    **{t: _random(t) for t in RANDOM},
    "aten.amax.default": _extremum_nan(aten.amax.default),
    "aten.amin.default": _extremum_nan(aten.amin.default),
    "aten.bitwise_and.Tensor": _bitwise(aten.bitwise_and.Tensor),
    "aten.bitwise_and.Scalar": _bitwise(aten.bitwise_and.Scalar),
    "aten.bitwise_or.Tensor": _bitwise(aten.bitwise_or.Tensor),
    "aten.bitwise_or.Scalar": _bitwise(aten.bitwise_or.Scalar),
    "aten.bitwise_xor.Tensor": _bitwise(aten.bitwise_xor.Tensor),
    "aten.bitwise_xor.Scalar": _bitwise(aten.bitwise_xor.Scalar),
    "aten.copy.default": _copy,
    "aten.isnan.default": _isnan,
    "aten.isinf.default": _isinf,
    "aten.bitwise_not.default": _bitwise_not,
    "aten.argmin.default": _argmin,
    "aten.floor.default": _rounding(aten.floor.default),
    "aten.ceil.default": _rounding(aten.ceil.default),
    "aten.trunc.default": _rounding(aten.trunc.default),
    "aten.round.default": _rounding(aten.round.default),
    "aten.fmod.Tensor": _modulo(aten.fmod.Tensor, None),
    "aten.fmod.Scalar": _modulo(None, aten.fmod.Scalar),
    "aten.remainder.Tensor": _modulo(aten.remainder.Tensor, None),
    "aten.remainder.Scalar": _modulo(None, aten.remainder.Scalar),
    "aten.tan.default": _unary_edges(aten.tan.default, -1.5, 1.5, [3.0, -20.0]),
    "aten.asin.default": _unary_edges(aten.asin.default, -1.0, 1.0, [1.5, -2.0]),
    "aten.acos.default": _unary_edges(aten.acos.default, -1.0, 1.0, [1.5, -2.0]),
    "aten.atan.default": _unary_edges(aten.atan.default, -10.0, 10.0, [1e30, -1e30]),
    "aten.sinh.default": _unary_edges(aten.sinh.default, -5.0, 5.0, [100.0, -100.0]),
    "aten.cosh.default": _unary_edges(aten.cosh.default, -5.0, 5.0, [100.0, -100.0]),
    "aten.asinh.default": _unary_edges(aten.asinh.default, -10.0, 10.0, [1e30, -1e30]),
    "aten.acosh.default": _unary_edges(aten.acosh.default, 1.0, 10.0, [0.5, -2.0]),
    "aten.atanh.default": _unary_edges(aten.atanh.default, -1.0, 1.0, [1.5, -2.0]),
    "aten.log2.default": _unary_edges(aten.log2.default, 0.0, 10.0, [-1.0, 1e30]),
    "aten.log10.default": _unary_edges(aten.log10.default, 0.0, 10.0, [-1.0, 1e30]),
    "aten.chunk.default": _chunk,
    "aten.clamp_max.default": _clamp_max,
    "aten.index.Tensor": _index,
    "aten.index_put.default": _index_put,
    "aten.scaled_dot_product_attention.default": _sdpa,
    "aten._scaled_dot_product_flash_attention_for_cpu.default": _flash,
    "aten._safe_softmax.default": _safe_softmax,
    "aten.arange.default": _arange,
    "aten.add.Scalar": _scalar_binary_alpha(aten.add.Scalar),
    "aten.sub.Scalar": _scalar_binary_alpha(aten.sub.Scalar),
    "aten.rsub.Scalar": _scalar_binary_alpha(aten.rsub.Scalar),
    "aten.mul.Scalar": _scalar_binary(aten.mul.Scalar),
    "aten.div.Scalar": _scalar_binary(aten.div.Scalar),
    "aten.eq.Scalar": _compare_scalar(aten.eq.Scalar),
    "aten.ne.Scalar": _compare_scalar(aten.ne.Scalar),
    "aten.lt.Scalar": _compare_scalar(aten.lt.Scalar),
    "aten.le.Scalar": _compare_scalar(aten.le.Scalar),
    "aten.gt.Scalar": _compare_scalar(aten.gt.Scalar),
    "aten.ge.Scalar": _compare_scalar(aten.ge.Scalar),
    "aten._to_copy.default": _to_copy,
    "aten.pow.Tensor_Scalar": _pow_scalar,
    "aten.clamp.default": _clamp,
    "aten.clamp_min.default": _clamp_min,
    "aten.alias.default": _alias,
    "aten.detach.default": _detach,
    "aten.lift_fresh_copy.default": _lift_fresh_copy,
    "aten.reshape.default": _reshape,
    "aten._unsafe_view.default": _unsafe_view,
    "aten.scalar_tensor.default": _scalar_tensor,
    "aten.where.ScalarOther": _where_scalar_other,
    "aten.where.ScalarSelf": _where_scalar_self,
    "aten._softmax_backward_data.default": _softmax_bwd(False),
    "aten._log_softmax_backward_data.default": _softmax_bwd(True),
    "aten.gelu_backward.default": _gelu_backward,
    "aten.threshold_backward.default": _threshold_backward,
    "aten.native_layer_norm_backward.default": _native_layer_norm_backward,
    "aten.convolution_backward.default": _convolution_backward,
    "aten._native_batch_norm_legit_functional.default": _batch_norm_functional,
    "aten._native_batch_norm_legit_no_training.default": _batch_norm_no_training,
    "aten.max_pool2d_with_indices_backward.default": _max_pool2d_backward,
    "aten._reshape_alias.default": _reshape_alias,
    "aten.upsample_nearest2d.default": _upsample(False, False),
    "aten.upsample_bilinear2d.default": _upsample(True, False),
    "aten.upsample_nearest2d_backward.default": _upsample(False, True),
    "aten.upsample_bilinear2d_backward.default": _upsample(True, True),
    "aten.avg_pool2d_backward.default": _avg_pool2d_backward,
    "aten._adaptive_avg_pool2d_backward.default": _adaptive_avg_pool2d_backward,
    "aten.native_group_norm_backward.default": _group_norm_backward,
    "aten.native_batch_norm_backward.default": _batch_norm_backward,
    "aten.clamp.Tensor": _clamp_tensor,
    "aten.var.dim": _var_dim,
    "aten._embedding_bag.default": _embedding_bag,
    "aten.grid_sampler_2d.default": _grid_sampler,
    "aten.max_pool2d_with_indices.default": _max_pool2d_nan,
    "aten.avg_pool3d.default": _pool3d(aten.avg_pool3d.default),
    "aten._adaptive_avg_pool3d.default": _pool3d(aten._adaptive_avg_pool3d.default),
    "aten.max_pool3d_with_indices.default": _pool3d(aten.max_pool3d_with_indices.default),
    "aten.masked_scatter.default": _masked_scatter,
    "aten.col2im.default": _col2im,
    "aten.convolution.default": _conv_transposed_outpad,
    "aten.native_layer_norm.default": _norm_stats(aten.native_layer_norm.default),
    "aten.native_group_norm.default": _norm_stats(aten.native_group_norm.default),
    "aten._cdist_forward.default": _distance(aten._cdist_forward.default),
    "aten._pdist_forward.default": _distance(aten._pdist_forward.default),
    "aten.sort.default": _sort_like(aten.sort.default),
    "aten.sort.stable": _sort_like(aten.sort.stable),
    "aten.topk.default": _sort_like(aten.topk.default),
    "aten.scatter_reduce.two": _scatter_reduce,
    "aten.scatter.src": _scatter(aten.scatter.src),
    "aten.scatter.value": _scatter(aten.scatter.value),
    "aten.embedding_dense_backward.default": _embedding_dense_backward,
    "aten._native_batch_norm_legit.no_stats": _batch_norm_no_stats,
    "aten.div.Tensor_mode": _div_mode(aten.div.Tensor_mode, False),
    "aten.div.Scalar_mode": _div_mode(aten.div.Scalar_mode, True),
    "aten.pow.Scalar": _pow_scalar,
    "aten.max.dim": _extremum_dim(aten.max.dim),
    "aten.min.dim": _extremum_dim(aten.min.dim),
    "aten.prod.default": _prod(aten.prod.default),
    "aten.prod.dim_int": _prod(aten.prod.dim_int),
    "aten.empty.memory_format": _empty(aten.empty.memory_format),
    "aten.empty_strided.default": _empty(aten.empty_strided.default),
    **{f"aten.{k}_pad{r}.default": _pads(getattr(aten, f"{k}_pad{r}").default)
       for k in ("reflection", "replication") for r in ("1d", "2d", "3d")},
}

# torch.export replaces these even when they are not in the decomposition table.
TRACE = {"aten.reshape.default", "aten.lift_fresh_copy.default", "aten._reshape_alias.default",
         "aten.upsample_bilinear2d.default", "aten.chunk.default", "aten.clamp_max.default", "aten.var.dim", *RANDOM}

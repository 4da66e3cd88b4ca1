"""Generates the small fixtures under test/fixtures/ (see docs/fixtures.md):

  mutation/      Mutation module: ATEN .pt2 (buffer mutation output), TRAINING .pt2 (for the
                 "re-export" error), bare model.json, FX text of both dialects, ops.txt, golden
  softmax_silu/  SoftmaxSilu module: same set; golden with 20 SGD steps like the real models
  conv_mix/      ConvMix module (every convolution form): same set, 20 SGD steps
Usage: gen_fixtures.py [FOLDER ...]   (only those; `conv_mix` and `get_attr` can be named)
  functionalize/ make_fx (no functionalization) FX text with in-place ops, the functionalized
                 reference FX text from torch, and numeric goldens (outputs, mutated inputs, grads)
  fxtext/        print_readable variants of the MLP (strides + device annotations)
  get_attr/      make_fx FX text with tensor constants (get_attr nodes), their values
                 (constants.safetensors, for `aotc --constants`) and a golden (loss, grads)
Each folder has a SHA256SUMS.
"""
import copy
import os
import zipfile

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import common
import models

FIX = os.path.join(common.REPO, "test", "fixtures")


def export_module(name, module, inputs, steps):
    folder = os.path.join(FIX, name)
    args = tuple(inputs.values())
    ep_train, ep = common.export_aten(copy.deepcopy(module), args)
    common.sanitize_stack_traces(ep_train, ep)
    files = common.save_program(ep, folder, name, ep_train)
    pt2 = os.path.join(folder, name + ".pt2")
    common.check_roundtrip(ep, pt2, copy.deepcopy(args))
    with open(os.path.join(folder, "ops.txt")) as f:
        common.check_archive(pt2, f.read().split())
    # The TRAINING-dialect archive (what torch.export.export alone gives): aotc must refuse it.
    torch.export.save(ep_train, os.path.join(folder, name + ".training.pt2"))
    files.append(name + ".training.pt2")
    # The bare ExportedProgram JSON, as stored in the archive.
    with zipfile.ZipFile(pt2) as z:
        common.write_text(os.path.join(folder, name + ".model.json"),
                          z.read(f"{name}/models/model.json").decode())
    files.append(name + ".model.json")

    golden = common.train_golden(module, inputs, steps=steps)
    for k, b in module.named_buffers():
        golden[f"buffer_final.{k}"] = b.detach().clone()
    common.save_golden(os.path.join(folder, "golden.safetensors"), golden,
                       {"model": name, "seed": "0"})
    files.append("golden.safetensors")
    common.write_sha256sums(folder, files)
    loss = golden["loss"]
    print(f"{name}: loss_first={loss[0].item():.9g} loss_last={loss[-1].item():.9g}")


def placeholder_names(gm):
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


def functionalize_case(folder, fn, inputs):
    """FX text of fn traced by make_fx with in-place ops kept, torch's functionalized graph of
    the same fn, and a golden: input.<ph>, output.<i>, mutated.<ph> (inputs changed in place),
    grad.<ph> (d sum(output_0) / d original value of every floating input)."""
    name = fn.__name__
    gm = make_fx(fn)(*[t.clone() for t in inputs])
    gm_func = make_fx(torch.func.functionalize(fn, remove="mutations_and_views"))(
        *[t.clone() for t in inputs])
    files = [name + ".fx.txt", name + ".functional.fx.txt", name + ".golden.safetensors"]
    common.write_text(os.path.join(folder, files[0]), common.fx_text(gm))
    common.write_text(os.path.join(folder, files[1]), common.fx_text(gm_func))

    phs = placeholder_names(gm)
    work = [t.clone() for t in inputs]  # fn mutates these
    with torch.no_grad():
        outs = fn(*work)
    golden = {f"input.{p}": t.clone() for p, t in zip(phs, inputs)}
    for i, o in enumerate(outs):
        golden[f"output.{i}"] = o.clone()
    for p, t, w in zip(phs, inputs, work):
        if not torch.equal(t, w):
            golden[f"mutated.{p}"] = w.clone()
    # Gradients through torch's functionalized graph (eager autograd refuses in-place ops on
    # values its backward needs, e.g. tanh's output): d output_0 / d original input values.
    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    fouts = gm_func(*[l.clone() for l in leaves])
    floats = [(p, l) for p, l in zip(phs, leaves) if l.requires_grad]
    grads = torch.autograd.grad(fouts[0], [l for _, l in floats], allow_unused=True)
    for (p, l), g in zip(floats, grads):
        golden[f"grad.{p}"] = torch.zeros_like(l) if g is None else g.detach().clone()
    # Cross-checks: the in-place graph and the functional graph compute eager's outputs.
    replay = gm(*[t.clone() for t in inputs])
    for i, o in enumerate(outs):
        assert torch.equal(replay[i], o), name
        assert torch.allclose(fouts[i].detach(), o, rtol=1e-6, atol=1e-6), name
    common.save_golden(os.path.join(folder, files[2]), golden, {"function": name})
    return files


def get_attr_case(folder):
    """make_fx of a function that closes over tensors: its FX text reads them with get_attr
    (`_tensor_constant0: "f32[3]" = self._tensor_constant0`), which aotc takes as constant
    inputs whose values --constants gives (docs/formats.md)."""
    scale = torch.tensor([0.5, -1.5, 2.0])
    table = torch.randn(4, 3)

    def f(x, w):
        return (((x @ w) + scale) * table.sum(0)).tanh().sum()

    x, w = torch.randn(2, 5), torch.randn(5, 3)
    gm = make_fx(f)(x, w)
    consts = {n.target: getattr(gm, n.target).clone() for n in gm.graph.nodes if n.op == "get_attr"}
    assert len(consts) == 2, consts
    common.write_text(os.path.join(folder, "get_attr.fx.txt"), common.fx_text(gm))
    common.write_safetensors(os.path.join(folder, "constants.safetensors"), consts,
                             {"torch_version": torch.__version__})
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    loss = f(xg, wg)
    loss.backward()
    nx, nw = placeholder_names(gm)  # make_fx names them x_1, w_1
    common.save_golden(os.path.join(folder, "golden.safetensors"),
                       {f"input.{nx}": x, f"input.{nw}": w, "loss": loss.detach().reshape(1),
                        f"grad.{nx}": xg.grad, f"grad.{nw}": wg.grad}, {"source": "gen_fixtures.py get_attr_case"})
    common.write_sha256sums(folder, ["get_attr.fx.txt", "constants.safetensors", "golden.safetensors"])


def main():
    import sys
    only = set(sys.argv[1:])  # folder names to regenerate (default: all)
    common.setup()
    if "get_attr" in only:
        torch.manual_seed(0)
        get_attr_case(os.path.join(FIX, "get_attr"))
    if not only or "conv_mix" in only:
        torch.manual_seed(0)
        m = models.ConvMix()
        export_module("conv_mix", m, {"x": torch.randn(2, 3, 8, 8), "y": torch.randn(2, 5, 64)},
                      steps=common.STEPS)
    if only:
        return
    torch.manual_seed(0)
    m = models.Mutation()
    export_module("mutation", m, {"x": torch.randn(3, 4)}, steps=1)

    torch.manual_seed(0)
    m = models.SoftmaxSilu()
    export_module("softmax_silu", m, {"x": torch.randn(4, 6), "y": torch.randn(4, 5)},
                  steps=common.STEPS)

    folder = os.path.join(FIX, "functionalize")
    torch.manual_seed(0)
    files = []
    files += functionalize_case(folder, models.mut_intermediate, [torch.randn(3, 4)])
    files += functionalize_case(folder, models.mut_input, [torch.randn(3, 4), torch.randn(3, 4)])
    files += functionalize_case(folder, models.mut_view, [torch.randn(3, 4)])
    files += functionalize_case(folder, models.mut_copy, [torch.randn(2, 3), torch.zeros(2, 3)])
    common.write_sha256sums(folder, files)

    # print_readable with strides and device annotations (FX-text parser coverage).
    folder = os.path.join(FIX, "fxtext")
    torch.manual_seed(0)
    from gen_models import build
    module, inputs, _, _, _ = build("mlp")
    _, ep = common.export_aten(module, tuple(inputs.values()))
    common.sanitize_stack_traces(ep)
    common.write_text(os.path.join(folder, "mlp.strides.fx.txt"), common.fx_text(ep.graph_module, True))
    common.write_text(os.path.join(folder, "mlp.print.txt"), str(ep))
    common.write_sha256sums(folder, ["mlp.strides.fx.txt", "mlp.print.txt"])

    torch.manual_seed(0)
    get_attr_case(os.path.join(FIX, "get_attr"))


if __name__ == "__main__":
    main()

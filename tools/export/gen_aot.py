"""AOTAutograd reference partitions of the two real models -> test/fixtures/aot/.

For each model (mlp, ln_gelu) and partitioner (default = default_partition, mincut =
min_cut_rematerialization_partition), traced by torch._functorch.aot_autograd.aot_function
with the Core ATen decomposition table, parameters requiring grad and user inputs not:
  <model>.joint.txt                  joint forward+backward graph given to the partitioner
  <model>.forward.<p>.txt            forward graph (outputs: loss, then saved values)
  <model>.backward.<p>.txt           backward graph
  <model>.saved.<p>.txt              saved values: name, dtype/shape annotation, bytes; total
                                     bytes, and bytes excluding primals (inputs)
These are references for aotc's partition tests; aotc's own graphs need not match node for node.
"""
import os

import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_function, make_boxed_func
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

import common
from gen_models import build

OUT = os.path.join(common.REPO, "test", "fixtures", "aot")
PARTITIONERS = {"default": default_partition, "mincut": min_cut_rematerialization_partition}


def annot(v):
    return f"{common.DTYPE_ABBR[v.dtype]}[{', '.join(str(d) for d in v.shape)}]"


def saved_summary(fw_gm, num_user_outputs):
    out = next(n for n in fw_gm.graph.nodes if n.op == "output")
    saved = list(out.args[0])[num_user_outputs:]
    lines, total, non_primal = [], 0, 0
    for n in saved:
        v = n.meta["val"]
        b = v.numel() * v.element_size()
        total += b
        if n.op != "placeholder":
            non_primal += b
        lines.append(f"{n.name} {annot(v)} {b}\n")
    # aotc's backward receives the primals again, so only non-primal values count as saved there.
    return "".join(lines) + f"total_bytes {total}\nnon_primal_bytes {non_primal}\n"


def run(model, pname):
    module, inputs, _, _, _ = build(model)
    names = [k for k, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for _, p in module.named_parameters()]
    n_params = len(params)
    captured = {}

    def f(*flat):
        state = dict(zip(names, flat[:n_params]))
        return (torch.func.functional_call(module, state, tuple(flat[n_params:])),)

    def compiler(tag):
        def c(gm, example_inputs):
            captured[tag] = gm
            return make_boxed_func(gm)
        return c

    def partition(joint, joint_inputs, **kw):
        captured["joint"] = joint.print_readable(print_output=False)
        return PARTITIONERS[pname](joint, joint_inputs, **kw)

    fn = aot_function(f, fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                      partition_fn=partition, decompositions=core_aten_decompositions())
    (loss,) = fn(*params, *inputs.values())
    loss.backward()
    # The partitioned graphs compute torch eager's gradients.
    ref = torch.autograd.grad(module(*inputs.values()), list(module.parameters()))
    for p, g in zip(params, ref):
        assert torch.allclose(p.grad, g, rtol=1e-5, atol=1e-6)
    files = [f"{model}.forward.{pname}.txt", f"{model}.backward.{pname}.txt",
             f"{model}.saved.{pname}.txt"]
    common.write_text(os.path.join(OUT, files[0]), common.fx_text(captured["forward"]))
    common.write_text(os.path.join(OUT, files[1]), common.fx_text(captured["backward"]))
    common.write_text(os.path.join(OUT, files[2]), saved_summary(captured["forward"], 1))
    if pname == "mincut":
        common.write_text(os.path.join(OUT, f"{model}.joint.txt"), captured["joint"])
        files.append(f"{model}.joint.txt")
    return files


def main():
    common.setup()
    files = []
    for model in ("mlp", "ln_gelu"):
        for pname in PARTITIONERS:
            files += run(model, pname)
    common.write_sha256sums(OUT, files)


if __name__ == "__main__":
    main()

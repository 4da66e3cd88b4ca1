"""Saved bytes of torch.compile's partition of the zoo models (test/fixtures/zoo), for the
closing notes and docs/testing.md: AOTAutograd with the min-cut partitioner Inductor uses
(min_cut_rematerialization_partition), the graphs run eagerly (no Inductor codegen, so it
takes seconds). The saved tensors are the backward graph's placeholders that are not tangents;
those named primals_* are inputs, which aotc's ABI passes to the backward again instead of
saving (abi.h), so the comparable number is the intermediates.

    $(tools/export/torch-python.sh) tools/parity/zoo_saved_bytes.py [MODEL ...]
"""
import os
import sys

import torch
from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
from torch._dynamo.backends.common import aot_autograd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "export"))
import gen_zoo  # noqa: E402


def saved_bytes(module, inputs):
    box = {}

    def fw(gm, _):
        return make_boxed_func(gm.forward)

    def bw(gm, _):
        total = primals = 0
        for n in gm.graph.nodes:
            if n.op == "placeholder" and not n.name.startswith("tangents"):
                v = n.meta.get("val")
                if isinstance(v, torch.Tensor):
                    b = v.numel() * v.element_size()
                    total += b
                    primals += b if n.name.startswith("primals") else 0
        box["bytes"], box["primals"] = total, primals
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=fw, bw_compiler=bw, partition_fn=min_cut_rematerialization_partition)
    torch._dynamo.reset()
    loss = torch.compile(module, backend=backend)(*inputs.values())
    loss.backward()
    return box["bytes"], box["primals"]


def main(argv):
    table = gen_zoo.models()
    for name in argv or list(table):
        make, make_inputs, train, *_ = table[name]
        torch.manual_seed(0)
        m = make()
        m.train(train)
        total, primals = saved_bytes(m, make_inputs())
        print(f"{name}: torch.compile (min-cut) saves {total} bytes, {primals} of them inputs "
              f"(parameters, the batch), {total - primals} intermediates", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

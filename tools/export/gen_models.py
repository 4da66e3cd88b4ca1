"""Generates the two real models with their goldens:

  examples/mlp/{mlp.pt2, ops.txt, mlp.fx.txt, mlp.training.fx.txt, golden.safetensors, SHA256SUMS}
  test/e2e/ln_gelu/{ln_gelu.pt2, ops.txt, ln_gelu.fx.txt, ln_gelu.training.fx.txt, golden.safetensors, SHA256SUMS}

Run through tools/export/run.sh (picks the torch venv). See docs/fixtures.md.
"""
import copy
import os

import torch

import common
from models import MLP, LnGelu


def build(name):
    if name == "mlp":
        torch.manual_seed(0)
        m = MLP()
        inputs = {"x": torch.randn(64, 784), "target": torch.randint(0, 10, (64,), dtype=torch.int64)}
        return m, inputs, os.path.join(common.REPO, "examples", "mlp"), (), 0
    if name == "ln_gelu":
        torch.manual_seed(1)
        m = LnGelu(64, 128)
        inputs = {"x": torch.randn(32, 64), "y": torch.randn(32, 128)}
        return m, inputs, os.path.join(common.REPO, "test", "e2e", "ln_gelu"), ("x",), 1
    raise ValueError(name)


def generate(name):
    module, inputs, folder, extra_grads, seed = build(name)
    args = tuple(inputs.values())
    # Export a copy: the exported program's state_dict aliases the module's parameters.
    ep_train, ep = common.export_aten(copy.deepcopy(module), args)
    common.sanitize_stack_traces(ep_train, ep)
    files = common.save_program(ep, folder, name, ep_train)
    pt2 = os.path.join(folder, name + ".pt2")
    common.check_roundtrip(ep, pt2, args)
    with open(os.path.join(folder, "ops.txt")) as f:
        common.check_archive(pt2, f.read().split())

    golden = common.train_golden(module, inputs, extra_grads)

    # Cross-checks: archive weights == golden params; exported loss ~= eager loss at step 0.
    loaded = torch.export.load(pt2)
    for fqn, t in loaded.state_dict.items():
        assert torch.equal(t, golden["param." + fqn]), fqn
    l0 = loaded.module()(*args)
    assert torch.allclose(l0, golden["loss"][0], rtol=1e-6, atol=0), (l0, golden["loss"][0])

    common.save_golden(os.path.join(folder, "golden.safetensors"), golden,
                       {"model": name, "seed": str(seed),
                        "extra_grad_inputs": ",".join(extra_grads)})
    files.append("golden.safetensors")
    common.write_sha256sums(folder, files)
    loss = golden["loss"]
    print(f"{name}: torch={torch.__version__} loss_first={loss[0].item():.9g} loss_last={loss[-1].item():.9g}")


if __name__ == "__main__":
    common.setup()
    for n in ("mlp", "ln_gelu"):
        generate(n)

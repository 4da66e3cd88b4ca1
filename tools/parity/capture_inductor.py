"""Captures the forward/backward partition torch.compile (Inductor) really uses for every
model graph of the repository -> test/fixtures/inductor/<model>/.

    AOTC_TORCH_PYTHON=/opt/torchvenv/bin/python tools/parity/capture_inductor.py [MODEL ...]

For each model (tools/export/models.py: mlp, ln_gelu, mutation, softmax_silu; same seeds and
inputs as tools/export/gen_models.py / gen_fixtures.py) it runs ONE training step of

    torch.compile(model, backend=lambda gm, ex: compile_fx(gm, ex, inner_compile=record))

where `record` writes the graph AOTAutograd's partitioner handed to Inductor as FX text
(`print_readable`; `is_backward` tells forward from backward) and then calls Inductor's own
`compile_fx_inner`, so the step really runs compiled. Exactly one forward and one backward
must be captured. Caches are off (fresh TORCHINDUCTOR_CACHE_DIR, fx_graph_cache and the
AOTAutograd cache disabled) so the partitioner really runs. Writes

    forward.txt   forward graph: primals -> (user outputs..., saved tensors...)
    backward.txt  backward graph: saved tensors (then tangents) -> gradients
    meta.json     torch version, partitioner and its config, inputs, gradient check, SHA-256s
    SHA256SUMS    sha256sum format, for the three files above

and checks the compiled step's gradients against eager. Stack-trace paths are made machine
independent. tools/parity/compare.py (stdlib only) reads these records; see docs/partition.md.
"""
import copy
import hashlib
import json
import os
import platform
import re
import sys
import tempfile

# The cache directory must be fresh before torch._inductor is imported.
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="aotc-parity-inductor-")
os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "export"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._functorch.config as functorch_config  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402
from torch._inductor.compile_fx import compile_fx, compile_fx_inner  # noqa: E402

import common  # noqa: E402  (tools/export/common.py)
import models  # noqa: E402
from gen_models import build as build_real  # noqa: E402

OUT = os.path.join(REPO, "test", "fixtures", "inductor")

# functorch config entries that steer min_cut_rematerialization_partition.
PARTITIONER_KEYS = [
    "cse", "activation_memory_budget", "activation_memory_budget_runtime_estimator",
    "activation_memory_budget_solver", "ban_recompute_used_far_apart",
    "ban_recompute_long_fusible_chains", "ban_recompute_materialized_backward",
    "ban_recompute_not_in_allowlist", "ban_recompute_reductions", "recompute_views",
    "aggressive_recomputation", "max_dist_from_bw", "enable_autograd_cache",
]
INDUCTOR_KEYS = ["fx_graph_cache", "fx_graph_remote_cache", "freezing", "cpp.simdlen"]


def build(name):
    """(module, ordered inputs, seed) exactly as the fixture generators build them."""
    if name in ("mlp", "ln_gelu"):
        module, inputs, _, _, seed = build_real(name)
        return module, inputs, seed
    torch.manual_seed(0)
    if name == "mutation":
        m = models.Mutation()
        return m, {"x": torch.randn(3, 4)}, 0
    if name == "softmax_silu":
        m = models.SoftmaxSilu()
        return m, {"x": torch.randn(4, 6), "y": torch.randn(4, 5)}, 0
    raise ValueError(f"unknown model '{name}'")


MODELS = ["mlp", "ln_gelu", "mutation", "softmax_silu"]
# Models whose torch.compile gradients differ from eager in this torch version (a torch bug,
# not a capture problem): the partition is still recorded, with the error in meta.json. A
# model listed here whose gradients DO match fails, so the list cannot go stale silently.
KNOWN_TORCH_GRAD_BUGS = {
    "mutation": "AOTAutograd (aot_eager and inductor alike) returns 2x eager's parameter "
                "gradients when a buffer mutation (buf.add_) and an in-place op on an "
                "intermediate (h.mul_) meet in one graph; either alone is correct",
}
# Where each model's exported graph lives (what aotc compiles); recorded in meta.json.
SOURCES = {"mlp": "examples/mlp/mlp.pt2", "ln_gelu": "test/e2e/ln_gelu/ln_gelu.pt2",
           "mutation": "test/fixtures/mutation/mutation.pt2",
           "softmax_silu": "test/fixtures/softmax_silu/softmax_silu.pt2"}

_TRACE_PATH = re.compile(r'(File ")?(?:' + re.escape(REPO + os.sep) + r'|/[^\s"]*?site-packages/)')


def sanitize(text):
    """Machine-independent stack-trace paths (repo- or site-packages-relative)."""
    return _TRACE_PATH.sub(lambda m: m.group(1) or "", text)


def config_value(mod, key):
    obj = mod
    for part in key.split("."):
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return obj if isinstance(obj, (bool, int, float, str, type(None))) else repr(obj)


def capture(name):
    module, inputs, seed = build(name)
    eager = copy.deepcopy(module)
    graphs = {"forward": [], "backward": []}

    def record(gm, example_inputs, **kwargs):
        kind = "backward" if kwargs.get("is_backward", False) else "forward"
        graphs[kind].append(sanitize(gm.print_readable(print_output=False)))
        return compile_fx_inner(gm, example_inputs, **kwargs)

    torch._dynamo.reset()
    compiled = torch.compile(module, backend=lambda gm, ex: compile_fx(gm, ex, inner_compile=record),
                             dynamic=False, fullgraph=True)
    loss = compiled(*inputs.values())
    loss.backward()
    assert len(graphs["forward"]) == 1 and len(graphs["backward"]) == 1, \
        f"{name}: expected one forward and one backward graph, got " \
        f"{len(graphs['forward'])} and {len(graphs['backward'])}"

    # The compiled step computes eager's loss and gradients.
    ref_loss = eager(*inputs.values())
    ref_grads = torch.autograd.grad(ref_loss, list(eager.parameters()))
    assert torch.allclose(loss.detach(), ref_loss.detach(), rtol=1e-5, atol=1e-6)
    max_err = 0.0
    for (fqn, p), g in zip(module.named_parameters(), ref_grads):
        err = ((p.grad - g).abs().max() / g.abs().max().clamp_min(1e-30)).item()
        max_err = max(max_err, err)
    grads_ok = max_err <= 1e-4
    if name in KNOWN_TORCH_GRAD_BUGS:
        assert not grads_ok, f"{name}: listed as a torch gradient bug but the gradients match"
        common.log(f"warning: {name}: torch.compile gradients differ from eager "
                   f"(max rel err {max_err:.3g}): {KNOWN_TORCH_GRAD_BUGS[name]}")
    else:
        assert grads_ok, (name, max_err)

    folder = os.path.join(OUT, name)
    files = {"forward.txt": graphs["forward"][0], "backward.txt": graphs["backward"][0]}
    for fname, text in files.items():
        common.write_text(os.path.join(folder, fname), text)
    meta = {
        "model": name,
        "module": f"tools/export/models.py:{type(module).__name__}",
        "aotc_source": SOURCES[name],
        "seed": seed,
        "inputs": {k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape)}
                   for k, v in inputs.items()},
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "capture": "torch.compile(model, backend=lambda gm, ex: compile_fx(gm, ex, "
                   "inner_compile=record), dynamic=False, fullgraph=True); one step "
                   "(loss = model(*inputs); loss.backward())",
        "partitioner": "torch._functorch.partitioners.min_cut_rematerialization_partition"
                       "(compiler='inductor') (compile_fx default)",
        "partitioner_config": {k: config_value(functorch_config, k) for k in PARTITIONER_KEYS},
        "inductor_config": {k: config_value(inductor_config, k) for k in INDUCTOR_KEYS},
        "cache": {"TORCHINDUCTOR_CACHE_DIR": "fresh temporary directory",
                  "fx_graph_cache": False, "autograd_cache": False},
        "check": {"loss": float(loss.item()), "max_rel_grad_err_vs_eager": max_err,
                  "grads_match_eager": grads_ok,
                  "torch_bug": KNOWN_TORCH_GRAD_BUGS.get(name)},
        "sha256": {f: hashlib.sha256(t.encode()).hexdigest() for f, t in sorted(files.items())},
    }
    common.write_text(os.path.join(folder, "meta.json"),
                      json.dumps(meta, indent=2, sort_keys=True) + "\n")
    common.write_sha256sums(folder, list(files) + ["meta.json"])


def main(argv):
    common.setup()
    torch._functorch.config.enable_autograd_cache = False
    inductor_config.fx_graph_cache = False
    names = argv or MODELS
    for n in names:
        if n not in MODELS:
            sys.exit(f"error: unknown model '{n}' (known: {', '.join(MODELS)})")
    for n in names:
        capture(n)


if __name__ == "__main__":
    main(sys.argv[1:])

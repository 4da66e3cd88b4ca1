"""Shared helpers of the Python binding tests (standard library only)."""
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.environ.get("AOTC_SRC_ROOT") or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC_ROOT, "python"))

MLP_PT2 = os.path.join(SRC_ROOT, "examples", "mlp", "mlp.pt2")
MLP_GOLDEN = os.path.join(SRC_ROOT, "examples", "mlp", "golden.safetensors")
LG_PT2 = os.path.join(SRC_ROOT, "test", "e2e", "ln_gelu", "ln_gelu.pt2")
LG_GOLDEN = os.path.join(SRC_ROOT, "test", "e2e", "ln_gelu", "golden.safetensors")


def env_path(var):
    """$var when it names an existing path, else None."""
    v = os.environ.get(var)
    return v if v and os.path.exists(v) else None


def work_dir(tag):
    """A fresh directory under $AOTC_TEST_WORK (or the system temp dir)."""
    base = os.environ.get("AOTC_TEST_WORK") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{tag}-", dir=base)


def rel_err(a, g):
    """max|a - g| / max|g| over two flat sequences (absolute when g is all zeros);
    a NaN gives inf. The error measure of issue 2 / tools/check_golden.py."""
    a, g = list(a), list(g)
    assert len(a) == len(g), (len(a), len(g))
    num = den = 0.0
    for x, y in zip(a, g):
        d = abs(x - y)
        if d != d:
            return math.inf
        num = max(num, d)
        den = max(den, abs(y))
    return num / den if den > 0 else num


def golden_inputs(program, golden):
    """Program inputs by name from a golden file: param.<FQN> or input.<name>."""
    out = {}
    for d in program.inputs:
        key = ("param." if d.role in ("parameter", "buffer") else "input.") + d.name
        if d.role == "buffer" and "buffer." + d.name in golden:
            key = "buffer." + d.name  # goldens of mutated buffers keep them apart
        out[d.name] = golden[key]
    return out

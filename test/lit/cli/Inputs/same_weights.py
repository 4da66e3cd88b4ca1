"""same_weights.py GOLDEN WEIGHTS: every param.<FQN> of GOLDEN is in WEIGHTS as
<FQN> with the same dtype, shape and bytes. Prints '<n> parameters bit-identical'
or the first difference (exit 1). Standard library only (python/aotc/_safetensors.py reads)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402


def read(path):
    f = st.read(path)
    return {k: (f[k].dtype, f[k].shape, f[k].data) for k in f.keys()}


golden, weights = read(sys.argv[1]), read(sys.argv[2])
params = sorted(k[len("param."):] for k in golden if k.startswith("param."))
for fqn in params:
    if fqn not in weights:
        sys.exit(f"missing {fqn}")
    if weights[fqn] != golden["param." + fqn]:
        sys.exit(f"{fqn} differs")
extra = sorted(set(weights) - set(params))
if extra:
    sys.exit(f"unexpected tensors {extra}")
print(f"{len(params)} parameters bit-identical")

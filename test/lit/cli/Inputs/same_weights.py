"""same_weights.py GOLDEN WEIGHTS: every param.<FQN> of GOLDEN is in WEIGHTS as
<FQN> with the same dtype, shape and bytes. Prints '<n> parameters bit-identical'
or the first difference (exit 1). Standard library only."""
import json
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


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

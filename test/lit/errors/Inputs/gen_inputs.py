#!/usr/bin/env python3
"""Writes the malformed ExportedProgram JSON / .pt2 inputs of test/lit/errors
(and the valid tiny ones of test/lit/capture/Inputs) from one small program.

The base program follows the format notes in docs/formats.md (schema 8.x as
written by torch.export.save): relu(x @ fc.weight.T + fc.bias).sum(), with
x: f32[4, 8], fc.weight: f32[16, 8], fc.bias: f32[16]. Stdlib only; the
outputs are committed, this script documents and regenerates them:
    python3 test/lit/errors/Inputs/gen_inputs.py
"""
import copy
import json
import os
import struct
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE_INPUTS = os.path.join(HERE, "..", "..", "capture", "Inputs")


def meta(dtype, sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.insert(0, acc)
        acc *= s
    return {"dtype": dtype, "sizes": [{"as_int": s} for s in sizes], "requires_grad": False,
            "device": {"type": "cpu", "index": None}, "strides": [{"as_int": s} for s in strides],
            "storage_offset": {"as_int": 0}, "layout": 7}


def node(target, inputs, outs, trace, name=None):
    return {"target": target,
            "inputs": [{"name": n, "arg": a, "kind": 1} for n, a in inputs],
            "outputs": [{"as_tensor": {"name": o}} for o in outs],
            "metadata": {"stack_trace": trace}, "is_hop_single_tensor_return": None,
            "name": name if name else outs[0]}


def t(name):
    return {"as_tensor": {"name": name}}


TRACE = 'File "tiny.py", line 7, in forward\n    return torch.relu(self.fc(x)).sum()'

BASE = {
    "graph_module": {
        "graph": {
            "inputs": [t("p_fc_weight"), t("p_fc_bias"), t("x")],
            "outputs": [t("sum_1")],
            "nodes": [
                node("torch.ops.aten.permute.default", [("self", t("p_fc_weight")), ("dims", {"as_ints": [1, 0]})],
                     ["permute"], TRACE),
                node("torch.ops.aten.addmm.default",
                     [("self", t("p_fc_bias")), ("mat1", t("x")), ("mat2", t("permute"))], ["addmm"], TRACE),
                node("torch.ops.aten.relu.default", [("self", t("addmm"))], ["relu"], TRACE),
                node("torch.ops.aten.sum.dim_IntList", [("self", t("relu")), ("dim", {"as_ints": []})],
                     ["sum_1"], TRACE),
            ],
            "tensor_values": {
                "p_fc_weight": meta(7, [16, 8]), "p_fc_bias": meta(7, [16]), "x": meta(7, [4, 8]),
                "permute": meta(7, [8, 16]), "addmm": meta(7, [4, 16]), "relu": meta(7, [4, 16]),
                "sum_1": meta(7, []),
            },
            "sym_int_values": {}, "sym_bool_values": {}, "is_single_tensor_return": False,
            "custom_obj_values": {}, "sym_float_values": {},
        },
        "signature": {
            "input_specs": [
                {"parameter": {"arg": {"name": "p_fc_weight"}, "parameter_name": "fc.weight"}},
                {"parameter": {"arg": {"name": "p_fc_bias"}, "parameter_name": "fc.bias"}},
                {"user_input": {"arg": t("x")}},
            ],
            "output_specs": [{"user_output": {"arg": t("sum_1")}}],
        },
        "module_call_graph": [], "metadata": {}, "treespec_namedtuple_fields": {},
    },
    "opset_version": {"aten": 10}, "range_constraints": {}, "schema_version": {"major": 8, "minor": 20},
    "verifiers": ["ATEN"], "torch_version": "2.9.1", "guards_code": [],
}


def nodes(j):
    return {n["outputs"][0]["as_tensor"]["name"]: n for n in j["graph_module"]["graph"]["nodes"]}


def tv(j):
    return j["graph_module"]["graph"]["tensor_values"]


def edited(fn):
    j = copy.deepcopy(BASE)
    fn(j)
    return j


def weights_config():
    cfg = {}
    for i, (fqn, sizes) in enumerate([("fc.weight", [16, 8]), ("fc.bias", [16])]):
        cfg[fqn] = {"path_name": "weight_%d" % i, "is_param": True, "use_pickle": False,
                    "tensor_meta": meta(7, sizes)}
    return {"config": cfg}


def weight_bytes(n, scale):
    return struct.pack("<%df" % n, *[scale * ((i % 7) - 3) for i in range(n)])


def pt2(path, members=None, model=None, drop=(), root="tiny/"):
    """A .pt2 as torch.export.save writes it (stored, one root folder)."""
    m = {
        "archive_format": b"pt2", "archive_version": b"0", "byteorder": b"little",
        ".data/version": b"6\n",
        "models/model.json": json.dumps(model if model is not None else BASE).encode(),
        "data/weights/model_weights_config.json": json.dumps(weights_config()).encode(),
        "data/weights/weight_0": weight_bytes(128, 0.125),
        "data/weights/weight_1": weight_bytes(16, 0.5),
        "data/constants/model_constants_config.json": b'{"config": {}}',
    }
    m.update(members or {})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for k in sorted(m):
            if k not in drop:
                z.writestr(zipfile.ZipInfo(root + k, (1980, 1, 1, 0, 0, 0)), m[k])


def write_json(name, j):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(j, f)


def main():
    os.makedirs(CAPTURE_INPUTS, exist_ok=True)
    # Valid inputs (test/lit/capture).
    with open(os.path.join(CAPTURE_INPUTS, "tiny.json"), "w") as f:
        json.dump(BASE, f)
    pt2(os.path.join(CAPTURE_INPUTS, "tiny.pt2"))

    # Malformed JSON programs.
    with open(os.path.join(HERE, "invalid.json"), "w") as f:
        f.write(json.dumps(BASE)[:200].replace('"outputs"', '"outputs" "x"') + "\n")
    write_json("unknown_op.json", edited(lambda j: nodes(j)["relu"].update(target="torch.ops.aten.frobnicate.default")))
    def many_problems(j):  # every unsupported op and the lifted constant, reported at once
        n = nodes(j)
        n["permute"].update(target="torch.ops.aten.frobnicate.default")
        n["relu"].update(target="torch.ops.aten.frobnicate.default")
        n["sum_1"].update(target="torch.ops.aten.quux.default")
        j["graph_module"]["signature"]["input_specs"][2] = {
            "tensor_constant": {"arg": t("x"), "tensor_constant_name": "c"}}
    write_json("many_problems.json", edited(many_problems))
    write_json("arity.json", edited(lambda j: nodes(j)["addmm"]["inputs"].pop()))
    write_json("meta_mismatch.json", edited(lambda j: tv(j)["addmm"]["sizes"].__setitem__(1, {"as_int": 15})))
    write_json("dangling.json", edited(lambda j: nodes(j)["relu"]["inputs"][0]["arg"]["as_tensor"].update(name="mm")))
    write_json("cycle.json", edited(lambda j: nodes(j)["permute"]["inputs"][0]["arg"]["as_tensor"].update(name="relu")))
    write_json("duplicate.json", edited(lambda j: nodes(j)["relu"]["outputs"][0]["as_tensor"].update(name="addmm")))
    write_json("dtype.json", edited(lambda j: tv(j)["x"].update(dtype=6)))
    write_json("dynamic.json", edited(lambda j: tv(j)["x"]["sizes"].__setitem__(
        0, {"as_expr": {"expr_str": "Symbol('s0', integer=True, positive=True)", "hint": {"as_int": 4}}})))
    write_json("training.json", edited(lambda j: j.update(verifiers=["TRAINING"])))
    write_json("schema_version.json", edited(lambda j: j["schema_version"].update(major=7)))

    # Malformed archives.
    pt2(os.path.join(HERE, "wrong_format.pt2"), members={"archive_format": b"aoti"})
    pt2(os.path.join(HERE, "missing_weight.pt2"), drop=("data/weights/weight_1",))
    pt2(os.path.join(HERE, "short_weight.pt2"), members={"data/weights/weight_0": weight_bytes(100, 1.0)})
    pt2(os.path.join(HERE, "unknown_op.pt2"), model=edited(
        lambda j: nodes(j)["relu"].update(target="torch.ops.aten.frobnicate.default")))
    with open(os.path.join(CAPTURE_INPUTS, "tiny.pt2"), "rb") as f:
        full = f.read()
    with open(os.path.join(HERE, "truncated.pt2"), "wb") as f:
        f.write(full[: len(full) // 2])
    with zipfile.ZipFile(os.path.join(HERE, "old_layout.pt2"), "w", zipfile.ZIP_STORED) as z:
        z.writestr("serialized_exported_program.json", json.dumps(BASE))
        z.writestr("serialized_state_dict.pt", b"")
        z.writestr("version", "8.20")


if __name__ == "__main__":
    main()

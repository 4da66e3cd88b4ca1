"""Copies a .pt2 archive with its models/model.json edited: edit_pt2.py IN.pt2 OUT.pt2 CODE.
CODE is Python run with `j` bound to the ExportedProgram JSON, `g` to its graph and `tv` to
the graph's tensor_values, and `size(expr)` making an `as_expr` size (the hostile and unusual
exports of capture/dynamic_runtime.test). Standard library only."""
import json
import sys
import zipfile


def size(expr):
    return {"as_expr": {"expr_str": expr, "hint": {"as_int": 8}}}


with zipfile.ZipFile(sys.argv[1]) as zin, zipfile.ZipFile(sys.argv[2], "w") as zout:
    for item in zin.infolist():
        data = zin.read(item.filename)
        if item.filename.endswith("models/model.json"):
            j = json.loads(data)
            g = j["graph_module"]["graph"]
            exec(sys.argv[3], {"j": j, "g": g, "tv": g["tensor_values"], "size": size})
            data = json.dumps(j).encode()
        zout.writestr(item, data)

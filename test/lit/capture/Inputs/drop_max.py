"""Copies a .pt2 archive with every range_constraints max_val set to null (an unbounded
torch.export.Dim, as torch writes int_oo): drop_max.py IN.pt2 OUT.pt2. Standard library only."""
import json
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as zin, zipfile.ZipFile(sys.argv[2], "w") as zout:
    for item in zin.infolist():
        data = zin.read(item.filename)
        if item.filename.endswith("models/model.json"):
            program = json.loads(data)
            for rc in program["range_constraints"].values():
                rc["max_val"] = None
            data = json.dumps(program).encode()
        zout.writestr(item, data)

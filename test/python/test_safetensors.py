"""The package's stdlib safetensors reader and writer (python/aotc/_safetensors.py): values of
a hand-built file and every rejection rule (the files are built by hand here on purpose: a
test of the format cannot use the writer it tests), and the writer's round trip."""
import json
import os
import struct
import unittest

import testutil  # noqa: F401  (sets sys.path)

import aotc
from aotc import _safetensors


def build(header, body, pad=True):
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + body


GOOD_HEADER = {
    "__metadata__": {"k": "v"},
    "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "b": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]},
    "c": {"dtype": "BOOL", "shape": [3], "data_offsets": [16, 19]},
    "d": {"dtype": "F64", "shape": [0, 4], "data_offsets": [19, 19]},
}
GOOD_BODY = struct.pack("<2f", 1.5, -2.0) + struct.pack("<q", -7) + b"\x01\x00\x01"


class Reader(unittest.TestCase):
    def test_values(self):
        f = _safetensors.parse(build(GOOD_HEADER, GOOD_BODY), "t")
        self.assertEqual(list(f.keys()), ["a", "b", "c", "d"])
        self.assertEqual(f.metadata, {"k": "v"})
        self.assertEqual((f["a"].dtype, f["a"].shape, f["a"].tolist()), ("f32", (2,), [1.5, -2.0]))
        self.assertEqual((f["b"].shape, f["b"].tolist()), ((), [-7]))
        self.assertEqual(f["c"].tolist(), [True, False, True])
        self.assertEqual((f["d"].shape, f["d"].tolist()), ((0, 4), []))
        with self.assertRaisesRegex(KeyError, "no tensor 'z'"):
            f["z"]

    def test_golden_file(self):
        g = aotc.read_safetensors(testutil.MLP_GOLDEN)
        self.assertEqual(g["input.x"].shape, (64, 784))
        self.assertEqual(g["loss"].dtype, "f32")
        self.assertEqual(g.metadata["steps"], "20")

    def test_rejections(self):
        def hdr(**over):
            h = json.loads(json.dumps(GOOD_HEADER))
            for k, v in over.items():
                if v is None:
                    h.pop(k)
                else:
                    h[k] = v
            return h

        cases = [
            (b"\x01\x02", "too short"),
            (struct.pack("<Q", 1000) + b"{}", "exceeds the file size"),
            (struct.pack("<Q", 3) + b"{x}", "not valid JSON"),
            (build([1], b""), "not a JSON object"),
            (build(hdr(__metadata__={"k": 1}), GOOD_BODY), "__metadata__"),
            (build(hdr(a={"dtype": "F32", "shape": [2]}), GOOD_BODY), "exactly dtype"),
            (build(hdr(a={"dtype": "F16", "shape": [2], "data_offsets": [0, 8]}), GOOD_BODY),
             "unsupported dtype"),
            (build(hdr(a={"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}), GOOD_BODY),
             "non-negative"),
            (build(hdr(a={"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}), GOOD_BODY),
             "outside"),
            (build(hdr(a={"dtype": "F32", "shape": [2], "data_offsets": [0, 80]}), GOOD_BODY),
             "outside"),
            (build(hdr(a={"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}), GOOD_BODY),
             "data_offsets span 8"),
            (build(hdr(b={"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}), GOOD_BODY),
             "overlaps"),
            (build(hdr(c=None, d=None), GOOD_BODY), "belong to no tensor"),
            (build(hdr(a={"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}), GOOD_BODY),
             "belong to no tensor"),
        ]
        for data, msg in cases:
            with self.subTest(msg=msg):
                with self.assertRaisesRegex(aotc.SafetensorsError, "^w: safetensors: .*" + msg):
                    _safetensors.parse(data, "w")

    def test_missing_file(self):
        with self.assertRaises(OSError):
            aotc.read_safetensors(os.path.join(testutil.work_dir("st"), "nope.safetensors"))


class Writer(unittest.TestCase):
    def test_round_trip_and_layout(self):
        import tempfile
        ts = [_safetensors.tensor("b", "f32", [2, 2], [1.5, -2.0, 0.0, 3.25]),
              _safetensors.tensor("a", "i64", [], [-7]),
              _safetensors.tensor("m", "bool", [3], [1, 0, 1]),
              _safetensors.tensor("e", "f64", [0], [])]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.safetensors")
            _safetensors.write(path, ts, {"k": "v"})
            data = open(path, "rb").read()
            f = _safetensors.read(path)
        self.assertEqual(list(f.keys()), ["b", "a", "m", "e"])  # the order given
        self.assertEqual(f["b"].tolist(), [1.5, -2.0, 0.0, 3.25])
        self.assertEqual((f["a"].dtype, f["a"].shape, f["a"].tolist()), ("i64", (), [-7]))
        self.assertEqual(f["m"].tolist(), [True, False, True])
        self.assertEqual(f["e"].shape, (0,))
        self.assertEqual(f.metadata, {"k": "v"})
        (n,) = struct.unpack("<Q", data[:8])
        self.assertEqual(n % 8, 0)  # the header is padded to 8 bytes
        self.assertEqual(json.loads(data[8:8 + n])["b"],
                         {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]})

    def test_bad_values_are_refused(self):
        with self.assertRaises(ValueError):
            _safetensors.tensor("x", "f32", [2], [1.0])  # 1 value for 2 elements
        with self.assertRaises(ValueError):
            _safetensors.tensor("x", "c64", [1], [1.0])


if __name__ == "__main__":
    unittest.main()

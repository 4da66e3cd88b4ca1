#!/usr/bin/env python3
"""Self-test of tools/parity/compare.py (stdlib unittest, no torch, no aotc build needed).

Small hand-written torch records and aotc partition texts whose saved bytes and recompute
FLOPs are computed by hand below; a fake `aotc` prints the aotc text. Checks the numbers,
the verdicts and exit codes, and that corrupt input is an error (exit 2), never a pass.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
COMPARE = os.path.join(REPO, "tools", "parity", "compare.py")

TORCH_FW = '''\
class GraphModule(torch.nn.Module):
    def forward(self, primals_1: "f32[4, 8]", primals_2: "f32[8, 16]"):
        # File: model.py:3 in forward, code: y = x @ w
        mm: "f32[4, 16]" = torch.ops.aten.mm.default(primals_1, primals_2)
        relu: "f32[4, 16]" = torch.ops.aten.relu.default(mm);  mm = None
        permute: "f32[16, 8]" = torch.ops.aten.permute.default(primals_2, [1, 0])
        t_relu: "f32[16, 4]" = torch.ops.aten.permute.default(relu, [1, 0])
        sum_1: "f32[]" = torch.ops.aten.sum.default(relu)
        return (sum_1, primals_1, permute, relu, t_relu)
'''
# Saved: primals_1 (input), permute (view of input primals_2), relu, t_relu (view of relu):
# one storage, relu f32[4,16] = 256 bytes. Tangent-free backward nodes: le (pointwise,
# 64), full (factory, 0), pt (view, 0), s (reduction over 64 elements, 64), again (mm
# 16x16 with k=4: 2*16*16*4 = 2048): 2176 FLOPs.
TORCH_BW = '''\
class GraphModule(torch.nn.Module):
    def forward(self, primals_1: "f32[4, 8]", permute: "f32[16, 8]", relu: "f32[4, 16]", t_relu: "f32[16, 4]", tangents_1: "f32[]"):
        le: "b8[4, 16]" = torch.ops.aten.le.Scalar(relu, 0)
        expand: "f32[4, 16]" = torch.ops.aten.expand.default(tangents_1, [4, 16]);  tangents_1 = None
        full: "f32[]" = torch.ops.aten.full.default([], 0.0, dtype = torch.float32, layout = torch.strided, device = device(type='cpu'), pin_memory = False)
        where: "f32[4, 16]" = torch.ops.aten.where.self(le, full, expand);  le = full = expand = None
        pt: "f32[8, 4]" = torch.ops.aten.permute.default(primals_1, [1, 0])
        mm_1: "f32[8, 16]" = torch.ops.aten.mm.default(pt, where)
        mm_2: "f32[4, 8]" = torch.ops.aten.mm.default(where, permute)
        s: "f32[16, 1]" = torch.ops.aten.sum.dim_IntList(t_relu, [1], True)
        again: "f32[16, 16]" = torch.ops.aten.mm.default(t_relu, relu)
        add: "f32[8, 16]" = torch.ops.aten.add.Tensor(mm_1, 1.0)
        return (mm_2, add, s, again, None)
'''

AOTC_HEADER = '''\
# aotc: stage partition
# aotc: name tiny
# aotc: input forward x role=user_input requires_grad=False
# aotc: input forward w role=parameter fqn=w requires_grad=True
# aotc: input forward b role=parameter fqn=b requires_grad=True
# aotc: input backward x role=user_input requires_grad=False
# aotc: input backward w role=parameter fqn=w requires_grad=True
# aotc: input backward b role=parameter fqn=b requires_grad=True
'''
# Saved: addmm f32[4,16] = 256 bytes (x, w, b are primals, not saved). Tangent-free
# backward nodes: relu (64), gt (64), wt2 (view, 0), again (addmm 4x16, k=8:
# 2*4*16*8 + 4*16 = 1088), xt (view, 0): 1216 FLOPs.
AOTC_BODY = '''\
class GraphModule(torch.nn.Module):
    def forward(self, x: "f32[4, 8]", w: "f32[16, 8]", b: "f32[16]"):
        wt: "f32[8, 16]" = torch.ops.aten.permute.default(w, [1, 0])
        addmm: "f32[4, 16]" = torch.ops.aten.addmm.default(b, x, wt)
        relu: "f32[4, 16]" = torch.ops.aten.relu.default(addmm)
        sum_1: "f32[]" = torch.ops.aten.sum.dim_IntList(relu, [])
        return (sum_1, addmm{extra_out})

    def backward(self, x: "f32[4, 8]", w: "f32[16, 8]", b: "f32[16]", addmm: "f32[4, 16]",{extra_ph} tangents_1: "f32[]"):
        relu: "f32[4, 16]" = torch.ops.aten.relu.default(addmm)
        gt: "b8[4, 16]" = torch.ops.aten.gt.Scalar(relu, 0)
        expand: "f32[4, 16]" = torch.ops.aten.expand.default(tangents_1, [4, 16])
        mul: "f32[4, 16]" = torch.ops.aten.mul.Tensor(expand, gt)
        wt2: "f32[8, 16]" = torch.ops.aten.permute.default(w, [1, 0])
        again: "f32[4, 16]" = torch.ops.aten.addmm.default(b, x, wt2)
        xt: "f32[8, 4]" = torch.ops.aten.permute.default(x, [1, 0])
        mm: "f32[8, 16]" = torch.ops.aten.mm.default(xt, mul)
        sum_2: "f32[16]" = torch.ops.aten.sum.dim_IntList(mul, [0])
        return (mm, sum_2, again)
'''


def aotc_text(extra_saved=False):
    head = AOTC_HEADER
    if extra_saved:  # relu (another 256-byte storage) saved too
        head += "# aotc: input backward relu_s role=saved requires_grad=False\n"
    head += ("# aotc: input backward addmm role=saved requires_grad=False\n"
             "# aotc: input backward tangents_1 role=tangent requires_grad=False\n")
    body = AOTC_BODY.format(extra_out=", relu" if extra_saved else "",
                            extra_ph=' relu_s: "f32[4, 16]",' if extra_saved else "")
    if extra_saved:  # the saved name must be a forward node
        body = body.replace('        return (sum_1, addmm, relu)',
                            '        relu_s: "f32[4, 16]" = torch.ops.aten.neg.default(relu)\n'
                            '        return (sum_1, addmm, relu_s)')
    return head + body


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.records = os.path.join(self.dir, "records")
        self.write_record("tiny", TORCH_FW, TORCH_BW)

    def tearDown(self):
        self.tmp.cleanup()

    def write_record(self, name, fw, bw, meta_extra=None):
        folder = os.path.join(self.records, name)
        os.makedirs(folder, exist_ok=True)
        meta = {"model": name, "aotc_source": "tiny.fx.txt",
                "check": {"grads_match_eager": True}}
        meta.update(meta_extra or {})
        files = {"forward.txt": fw, "backward.txt": bw,
                 "meta.json": json.dumps(meta, indent=2) + "\n"}
        sums = ""
        for fname, text in sorted(files.items()):
            with open(os.path.join(folder, fname), "w") as f:
                f.write(text)
            sums += f"{hashlib.sha256(text.encode()).hexdigest()}  {fname}\n"
        with open(os.path.join(folder, "SHA256SUMS"), "w") as f:
            f.write(sums)

    def fake_aotc(self, text, rc=0):
        txt = os.path.join(self.dir, "aotc_output.txt")
        with open(txt, "w") as f:
            f.write(text)
        path = os.path.join(self.dir, "aotc")
        with open(path, "w") as f:
            f.write(textwrap.dedent(f"""\
                #!{sys.executable}
                import sys
                assert sys.argv[2] == "--emit=partition", sys.argv
                sys.stdout.write(open({txt!r}).read())
                sys.exit({rc})
                """))
        os.chmod(path, 0o755)
        return path

    def run_compare(self, aotc, *args):
        r = subprocess.run([sys.executable, COMPARE, "--aotc", aotc, "--records", self.records,
                            *args], capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr

    def test_hand_computed_numbers(self):
        rc, out, err = self.run_compare(self.fake_aotc(aotc_text()), "-v")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("tiny [min-cut]: aotc bytes=256 flops=1216  torch bytes=256 flops=2176  ok",
                      out)
        self.assertIn("graph inputs or their views (0 bytes): primals_1, permute", out)
        self.assertIn("storages: relu=256\n", out)
        self.assertIn("recomputed 5 (relu, gt, wt2, again, xt) = 1216 FLOPs", out)
        self.assertIn("recomputed 5 (le, full, pt, s, again) = 2176 FLOPs", out)
        self.assertTrue(out.rstrip().endswith(
            "partition-parity: graphs=1 aotc_bytes=256 torch_bytes=256 worse=0 "
            "aotc_recompute_flops=1216 torch_recompute_flops=2176 torch_invalid=0"), out)
        # --expect-worse fails when aotc loses nowhere.
        rc, _, err = self.run_compare(self.fake_aotc(aotc_text()), "--expect-worse")
        self.assertEqual(rc, 1)
        self.assertIn("aotc loses on no graph", err)

    def test_more_bytes_is_worse(self):
        rc, out, err = self.run_compare(self.fake_aotc(aotc_text(extra_saved=True)))
        self.assertEqual(rc, 1, out + err)
        self.assertIn("aotc bytes=512 flops=1216  torch bytes=256 flops=2176  WORSE (bytes)", out)
        self.assertIn("worse=1", out)
        rc, _, _ = self.run_compare(self.fake_aotc(aotc_text(extra_saved=True)), "--expect-worse")
        self.assertEqual(rc, 0)

    def test_more_flops_is_worse(self):
        # torch recomputes nothing tangent-free but views: aotc's 1216 FLOPs lose.
        bw = TORCH_BW.replace("torch.ops.aten.le.Scalar(relu, 0)",
                              "torch.ops.aten.le.Scalar(expand_t, 0)")
        bw = bw.replace('        le: "b8', '        expand_t: "f32[4, 16]" = '
                        'torch.ops.aten.expand.default(tangents_1, [4, 16])\n        le: "b8', 1)
        bw = bw.replace("torch.ops.aten.sum.dim_IntList(t_relu, [1], True)",
                        "torch.ops.aten.sum.dim_IntList(mm_1, [1], True)")
        bw = bw.replace('s: "f32[16, 1]"', 's: "f32[8, 1]"')
        bw = bw.replace("torch.ops.aten.mm.default(t_relu, relu)", "torch.ops.aten.mm.default(mm_2, relu)")
        bw = bw.replace('again: "f32[16, 16]"', 'again: "f32[8, 16]"')
        self.write_record("tiny", TORCH_FW, bw)
        rc, out, _ = self.run_compare(self.fake_aotc(aotc_text()))
        self.assertEqual(rc, 1)
        self.assertIn("torch bytes=256 flops=0  WORSE (flops)", out)

    def test_invalid_torch_record_is_not_compared(self):
        self.write_record("tiny", TORCH_FW, TORCH_BW,
                          {"check": {"grads_match_eager": False, "torch_bug": "2x grads"}})
        rc, out, _ = self.run_compare(self.fake_aotc(aotc_text(extra_saved=True)))
        self.assertEqual(rc, 0, out)
        self.assertIn("not compared: torch.compile's gradients differ from eager (2x grads)", out)
        self.assertIn("graphs=0 ", out)
        self.assertIn("torch_invalid=1", out)

    def test_corrupt_record_is_an_error(self):
        with open(os.path.join(self.records, "tiny", "backward.txt"), "a") as f:
            f.write("\n")
        rc, _, err = self.run_compare(self.fake_aotc(aotc_text()))
        self.assertEqual(rc, 2)
        self.assertIn("SHA-256 differs", err)

    def test_op_missing_from_table_is_an_error(self):
        self.write_record("tiny", TORCH_FW,
                          TORCH_BW.replace("aten.le.Scalar", "aten.frobnicate.default"))
        rc, _, err = self.run_compare(self.fake_aotc(aotc_text()))
        self.assertEqual(rc, 2)
        self.assertIn("'aten.frobnicate.default' (node 'le') is not in the FLOPs table", err)

    def test_failing_aotc_is_an_error(self):
        rc, _, err = self.run_compare(self.fake_aotc(aotc_text(), rc=1))
        self.assertEqual(rc, 2)
        self.assertIn("failed (exit 1)", err)

    def test_saved_name_must_be_a_forward_node(self):
        # The forward calls it addmm_f: the backward's Saved 'addmm' has no producer.
        text = aotc_text().replace(
            'return (sum_1, addmm)', 'return (sum_1, wt)').replace(
            'addmm: "f32[4, 16]" = torch.ops.aten.addmm.default(b, x, wt)',
            'addmm_f: "f32[4, 16]" = torch.ops.aten.addmm.default(b, x, wt)').replace(
            'torch.ops.aten.relu.default(addmm)\n        sum_1',
            'torch.ops.aten.relu.default(addmm_f)\n        sum_1')
        rc, _, err = self.run_compare(self.fake_aotc(text))
        self.assertEqual(rc, 2)
        self.assertIn("saved tensor 'addmm' is not a forward node", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)

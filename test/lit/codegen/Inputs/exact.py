"""exact.py: what the codegen checkers share (index_split_check.py, index_split_refused_check.py,
column_scatter_check.py, view_slots_check.py, gemm_runs_check.py, pointwise_join_check.py; each
runs from this folder, so `import exact` finds it): f32 rounding and the bit-for-bit comparison.
Standard library only."""
import struct


def f32(v):
    """v rounded to float32 (as a Python float)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def bits_mismatch(name, got, ref):
    """None when got and ref have the same length and the same f32 bits element by element;
    else one line saying how many elements differ and where the first is."""
    wrong = [i for i, (g, w) in enumerate(zip(got, ref)) if struct.pack("<f", g) != struct.pack("<f", w)]
    if len(got) == len(ref) and not wrong:
        return None
    size = "" if len(got) == len(ref) else f"; {len(got)} elements, want {len(ref)}"
    return f"{name}: {len(wrong)} of {len(ref)} elements differ (first at {wrong[:1]}){size}"

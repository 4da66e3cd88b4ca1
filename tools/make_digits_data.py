#!/usr/bin/python3
"""Writes examples/digits/digits.safetensors: scikit-learn's bundled handwritten digits
(sklearn.datasets.load_digits: 1,797 8x8 images, 16 grey levels, 10 classes; no download)
split once into train and test sets, stratified, with a fixed seed.

  train.x u8[1437,64]   pixel values 0..16, row-major 8x8 (the C++ example divides by 16)
  train.y i64[1437]     class 0..9
  test.x  u8[360,64]
  test.y  i64[360]

__metadata__: source, sklearn_version, seed. Run with Debian's Python, which sees
python3-sklearn (the `python3` on PATH may be another one):

  /usr/bin/python3 tools/make_digits_data.py
"""
import os
import sys

import numpy as np
import sklearn
from sklearn.datasets import load_digits

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
from aotc import _safetensors as st  # noqa: E402
OUT = os.path.join(REPO, "examples", "digits", "digits.safetensors")
SEED = 0
TEST = 360


def write_safetensors(path, tensors, metadata):
    """`tensors`: name -> numpy array (uint8 or int64), written sorted by name, atomically, by
    the package's writer (python/aotc/_safetensors.py; sorted JSON keys, as this file always was)."""
    dtypes = {np.dtype(np.uint8): "u8", np.dtype(np.int64): "i64"}
    ts = [st.tensor(n, dtypes[tensors[n].dtype], list(tensors[n].shape), np.ascontiguousarray(tensors[n]).tobytes())
          for n in sorted(tensors)]
    st.write(path, ts, metadata, sort_keys=True)


def main():
    d = load_digits()
    x = d.data.astype(np.uint8)  # 0..16
    y = d.target.astype(np.int64)
    rng = np.random.default_rng(SEED)
    # Stratified: TEST/10 = 36 test images of every class (each has at least 174).
    test_idx = []
    per_class = TEST // 10
    for c in range(10):
        idx = np.flatnonzero(y == c)
        test_idx.extend(rng.choice(idx, per_class, replace=False).tolist())
    test_idx = np.array(sorted(test_idx))
    train_mask = np.ones(len(y), bool)
    train_mask[test_idx] = False
    train_idx = rng.permutation(np.flatnonzero(train_mask))
    test_idx = rng.permutation(test_idx)
    write_safetensors(OUT, {"train.x": x[train_idx], "train.y": y[train_idx],
                            "test.x": x[test_idx], "test.y": y[test_idx]},
                      {"source": "sklearn.datasets.load_digits (UCI optdigits test set, 1797 images)",
                       "sklearn_version": sklearn.__version__, "seed": str(SEED),
                       "generator": "tools/make_digits_data.py"})
    print(f"{os.path.relpath(OUT, REPO)}: train {len(train_idx)}, test {len(test_idx)}, "
          f"{os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()

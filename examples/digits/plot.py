#!/usr/bin/python3
"""Draws the digits example's curves: plot.py METRICS.csv OUT.png (Debian's python3-matplotlib;
run it with /usr/bin/python3). METRICS is what digits_example writes: epoch, steps, lr,
train_loss, test_loss, test_accuracy, seconds per epoch. Writes OUT atomically; prints nothing."""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(metrics, out):
    with open(metrics, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{metrics}: no epochs")
    epoch = [int(r["epoch"]) for r in rows]
    col = lambda k: [float(r[k]) for r in rows]  # noqa: E731
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(epoch, col("train_loss"), label="train loss")
    a.plot(epoch, col("test_loss"), label="test loss")
    a.set_xlabel("epoch")
    a.set_ylabel("cross-entropy")
    a.set_yscale("log")
    a.legend()
    b.plot(epoch, col("test_accuracy"), color="tab:green")
    b.set_xlabel("epoch")
    b.set_ylabel("test accuracy")
    b.set_ylim(min(0.9, min(col("test_accuracy"))), 1.0)
    b.grid(True, alpha=0.3)
    fig.suptitle(f"aotc digits CNN: {epoch[-1]} epochs, {float(rows[-1]['seconds']):.1f} s, "
                 f"test accuracy {float(rows[-1]['test_accuracy']):.4f}")
    fig.tight_layout()
    tmp = out + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py METRICS.csv OUT.png")
    main(sys.argv[1], sys.argv[2])

"""Compares loom-check logits' scores (raw f32, a row of `vocab` per token)
with transformers' (scripts/hf-logits.py's logits.npy): the largest
difference, relative to the scores' scale, must be within the tolerance.

    compare-logits.py LOOM EXPECTED.npy TOLERANCE
"""
import sys

import numpy as np


def main():
    expected = np.load(sys.argv[2]).astype(np.float64)
    got = np.fromfile(sys.argv[1], dtype=np.float32).astype(np.float64)
    if got.size != expected.size:
        sys.exit(f"{got.size} scores, expected {expected.size}")
    got = got.reshape(expected.shape)
    scale = max(1.0, float(np.abs(expected).max()))
    worst = float(np.abs(got - expected).max()) / scale
    if not worst <= float(sys.argv[3]):
        sys.exit(f"largest difference {worst:.3g} (of a scale of {scale:.3g}), "
                 f"more than {sys.argv[3]}")
    print(f"logits: {expected.shape[0]} x {expected.shape[1]} within "
          f"{sys.argv[3]} of transformers'")


main()

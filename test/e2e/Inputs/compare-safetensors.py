"""Fails unless two safetensors files hold the same tensor names, shapes and
values (to a relative tolerance, 0 by default: bit for bit).

usage: compare-safetensors.py A B [TOLERANCE]"""
import sys

import numpy as np
from safetensors.numpy import load_file

a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
if sorted(a) != sorted(b):
    sys.exit(f"different tensors: {sorted(set(a) ^ set(b))}")
for name in sorted(a):
    x, y = a[name], b[name]
    if x.shape != y.shape:
        sys.exit(f"{name}: {x.shape} and {y.shape}")
    scale = max(float(np.abs(x).max(initial=0.0)), 1e-30)
    if float(np.abs(x.astype(np.float64) - y).max(initial=0.0)) > tolerance * scale:
        sys.exit(f"{name}: the values differ")
print(f"safetensors: {len(a)} tensors, the same")

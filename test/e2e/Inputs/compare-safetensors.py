"""Fails unless two safetensors files hold the same tensor names and shapes
and the same values: bit for bit, or with a TOLERANCE as
compare-checkpoints.py measures it (for each tensor, the root mean square of
a - b at most TOLERANCE * the largest |a| of the model: AdamW turns the
rounding of a gradient near its epsilon into a step of up to the learning
rate, so single elements may differ between two orders of summation while a
tensor whose gradient is wrong differs in most of its elements).

usage: compare-safetensors.py A B [TOLERANCE]"""
import sys

import numpy as np
from safetensors.numpy import load_file

a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else None
if sorted(a) != sorted(b):
    sys.exit(f"different tensors: {sorted(set(a) ^ set(b))}")
for name in sorted(a):
    if a[name].shape != b[name].shape or a[name].dtype != b[name].dtype:
        sys.exit(f"{name}: {a[name].dtype}{a[name].shape} and "
                 f"{b[name].dtype}{b[name].shape}")
if tolerance is None:
    for name in sorted(a):
        if a[name].tobytes() != b[name].tobytes():
            sys.exit(f"{name}: the values differ")
    print(f"safetensors: {len(a)} tensors, the same")
    sys.exit(0)
scale = max(float(np.abs(x).max(initial=0.0)) for x in a.values())
rms = {n: float(np.sqrt(np.mean((a[n].astype(np.float64) - b[n]) ** 2)))
       for n in a}
worst = max(rms, key=rms.get)
print(f"safetensors: {len(a)} tensors, largest root mean square difference "
      f"of a tensor relative to the largest parameter "
      f"{rms[worst] / scale:.2e} ({worst})")
sys.exit(0 if rms[worst] <= tolerance * scale else 1)

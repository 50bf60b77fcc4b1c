"""Fails unless two loom-run logs have the same number of steps and training
losses that agree to a relative tolerance."""
import re
import sys


def losses(path):
    text = open(path).read()
    return [float(m.group(1)) for m in re.finditer(r"^step +\d+/\d+ \| loss ([0-9.]+)", text, re.M)]


a, b, tolerance = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
if not a or len(a) != len(b):
    sys.exit(f"{len(a)} and {len(b)} training steps")
worst = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))
print(f"{len(a)} steps, largest relative difference of the losses {worst:.2e}")
sys.exit(0 if worst <= tolerance else 1)

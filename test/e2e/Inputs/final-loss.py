"""Fails unless the last training loss loom-run printed is below a bound."""
import re
import sys

losses = [float(m.group(1)) for m in re.finditer(r"^step +\d+/\d+ \| loss ([0-9.]+)", open(sys.argv[1]).read(), re.M)]
if not losses:
    sys.exit("no training steps in the output")
bound = float(sys.argv[2])
print(f"first loss {losses[0]:.4f}, last loss {losses[-1]:.4f}, bound {bound}")
sys.exit(0 if losses[-1] < bound else 1)

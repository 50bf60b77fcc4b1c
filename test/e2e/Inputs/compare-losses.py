"""Fails unless two loom-run logs have the same number of steps and training
losses that agree to a relative tolerance (and, with --norms, gradient norms
too), and the same number of validation losses, agreeing to it too.

    compare-losses.py A.log B.log TOLERANCE [--norms | --mean-over N]

With --mean-over N, the training losses compared are the means over each N
consecutive steps: the curves, rather than single steps, whose differences
an unusual batch magnifies."""
import re
import sys


def losses(path, pattern):
    text = open(path).read()
    return [float(m.group(1)) for m in re.finditer(pattern, text, re.M)]


def worst(a, b):
    return max((abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)), default=0.0)


train = r"^step +\d+/\d+ \| loss ([0-9.]+)"
norm = r"^step +\d+/\d+ \| loss [0-9.]+ \| norm ([0-9.]+)"
val = r"^step +\d+ \| val loss ([0-9.]+)"
tolerance = float(sys.argv[3])
a, b = losses(sys.argv[1], train), losses(sys.argv[2], train)
na, nb = ([], [])
if sys.argv[4:5] == ["--mean-over"]:
    n = int(sys.argv[5])
    if not a or len(a) != len(b) or len(a) % n:
        sys.exit(f"{len(a)} and {len(b)} training steps, not in windows of {n}")
    a, b = ([sum(x[i:i + n]) / n for i in range(0, len(x), n)] for x in (a, b))
elif sys.argv[4:] == ["--norms"]:
    na, nb = losses(sys.argv[1], norm), losses(sys.argv[2], norm)
    if len(na) != len(a) or len(nb) != len(b):
        sys.exit("a step line without its gradient norm")
va, vb = losses(sys.argv[1], val), losses(sys.argv[2], val)
if not a or len(a) != len(b):
    sys.exit(f"{len(a)} and {len(b)} training steps")
if len(va) != len(vb):
    sys.exit(f"{len(va)} and {len(vb)} validations")
steps = f"{len(a)} means of {sys.argv[5]} steps" if sys.argv[4:5] == ["--mean-over"] else f"{len(a)} steps"
print(f"{steps}, largest relative difference of the losses {worst(a, b):.2e}"
      + (f", of the gradient norms {worst(na, nb):.2e}" if na else "")
      + (f"; {len(va)} validations, {worst(va, vb):.2e}" if va else ""))
sys.exit(0 if max(worst(a, b), worst(na, nb), worst(va, vb)) <= tolerance else 1)

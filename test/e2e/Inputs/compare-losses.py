"""Fails unless two loom-run logs have the same number of steps and training
losses that agree to a relative tolerance (and, with --norms, gradient norms
too), and the same number of validation losses, agreeing to it too.

    compare-losses.py A.log B.log[,B2.log...] TOLERANCE [--norms | --mean-over N]

With --mean-over N, the training losses compared are the means over each N
consecutive steps: the curves, rather than single steps, whose differences
an unusual batch magnifies.

Several comma-separated logs in place of B are runs of one artifact that
differ only in their rounding (their thread counts): B's losses are then
their means, step by step, and a difference is the artifact's rather than
one rounding's. They must agree on their validation losses' count."""
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
ensemble = sys.argv[2].split(",")


def mean_losses(pattern):
    runs = [losses(path, pattern) for path in ensemble]
    if any(len(run) != len(runs[0]) for run in runs):
        sys.exit(f"{', '.join(str(len(run)) for run in runs)} steps in {sys.argv[2]}")
    return [sum(step) / len(runs) for step in zip(*runs)]


a, b = losses(sys.argv[1], train), mean_losses(train)
na, nb = ([], [])
if sys.argv[4:5] == ["--mean-over"]:
    n = int(sys.argv[5])
    if not a or len(a) != len(b) or len(a) % n:
        sys.exit(f"{len(a)} and {len(b)} training steps, not in windows of {n}")
    a, b = ([sum(x[i:i + n]) / n for i in range(0, len(x), n)] for x in (a, b))
elif sys.argv[4:] == ["--norms"]:
    na, nb = losses(sys.argv[1], norm), mean_losses(norm)
    if len(na) != len(a) or len(nb) != len(b):
        sys.exit("a step line without its gradient norm")
va, vb = losses(sys.argv[1], val), mean_losses(val)
if not a or len(a) != len(b):
    sys.exit(f"{len(a)} and {len(b)} training steps")
if len(va) != len(vb):
    sys.exit(f"{len(va)} and {len(vb)} validations")
steps = f"{len(a)} means of {sys.argv[5]} steps" if sys.argv[4:5] == ["--mean-over"] else f"{len(a)} steps"
print(f"{steps}, largest relative difference of the losses {worst(a, b):.2e}"
      + (f", of the gradient norms {worst(na, nb):.2e}" if na else "")
      + (f"; {len(va)} validations, {worst(va, vb):.2e}" if va else ""))
sys.exit(0 if max(worst(a, b), worst(na, nb), worst(va, vb)) <= tolerance else 1)

"""Writes an llm.c GPT-2 checkpoint (version 3, fp32) with pseudo-random
weights from a fixed generator, so that tests can load the same weights into
any build without a binary file in the tree.

  make-checkpoint.py OUT LAYERS WIDTH HEADS VOCAB PADDED_VOCAB POSITIONS [--seed N]

Tensors in llm.c's order, each stacked over layers: wte, wpe, ln1w, ln1b,
qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw,
lnfb. Matrices get values of standard deviation about 0.05, biases 0.01,
layer-norm weights 1 plus a small perturbation.
"""
import argparse
import struct

p = argparse.ArgumentParser()
p.add_argument("out")
for name in ("layers", "width", "heads", "vocab", "padded_vocab", "positions"):
    p.add_argument(name, type=int)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()

state = a.seed


def uniform():
    """A value in [-1, 1) from a 64-bit linear congruential generator."""
    global state
    state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    return ((state >> 40) / float(1 << 24)) * 2.0 - 1.0


def tensor(count, scale, offset=0.0):
    # The sum of three uniforms is close enough to a normal for weights.
    return [offset + scale * (uniform() + uniform() + uniform()) for _ in range(count)]


L, C, V, Vp, P = a.layers, a.width, a.vocab, a.padded_vocab, a.positions
values = []
values += tensor(Vp * C, 0.05)                      # wte
values += tensor(P * C, 0.05)                       # wpe
values += tensor(L * C, 0.05, 1.0)                  # ln1w
values += tensor(L * C, 0.01)                       # ln1b
values += tensor(L * 3 * C * C, 0.05)               # qkvw
values += tensor(L * 3 * C, 0.01)                   # qkvb
values += tensor(L * C * C, 0.05)                   # attprojw
values += tensor(L * C, 0.01)                       # attprojb
values += tensor(L * C, 0.05, 1.0)                  # ln2w
values += tensor(L * C, 0.01)                       # ln2b
values += tensor(L * 4 * C * C, 0.05)               # fcw
values += tensor(L * 4 * C, 0.01)                   # fcb
values += tensor(L * C * 4 * C, 0.05)               # fcprojw
values += tensor(L * C, 0.01)                       # fcprojb
values += tensor(C, 0.05, 1.0)                      # lnfw
values += tensor(C, 0.01)                           # lnfb
header = [20240326, 3, P, V, L, a.heads, C, Vp] + [0] * 248
with open(a.out, "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack(f"<{len(values)}f", *values))

"""Writes an llm.c token shard: 256 int32 header (magic 20240520, version 1,
token count), then the tokens as uint16. Tokens follow a fixed pseudo-random
walk over a vocabulary, so the shard has structure to learn.

  make-shard.py OUT COUNT VOCAB [--header-count N] [--truncate BYTES]
"""
import argparse
import struct

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("count", type=int)
p.add_argument("vocab", type=int)
p.add_argument("--header-count", type=int)
p.add_argument("--magic", type=int, default=20240520)
p.add_argument("--version", type=int, default=1)
a = p.parse_args()
state, tokens = 12345, []
for _ in range(a.count):
    state = (state * 1103515245 + 12345) % (1 << 31)
    tokens.append((len(tokens) * 3 + (state >> 16) % 3) % a.vocab)
header = [a.magic, a.version, a.count if a.header_count is None else a.header_count] + [0] * 253
with open(a.out, "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack(f"<{a.count}H", *tokens))

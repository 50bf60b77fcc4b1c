"""Writes an llm.c token shard: 256 int32 header (magic 20240520, version 1,
token count), then the tokens as uint16. Tokens follow a fixed pseudo-random
walk over a vocabulary, so the shard has structure to learn.

  make-shard.py OUT COUNT VOCAB [--header-count N] [--wide]

--wide writes llm.c's 32-bit shard (magic 20240801, version 7, uint32
tokens, as its Llama 3 data), for vocabularies past 65,536.
"""
import argparse
import struct

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("count", type=int)
p.add_argument("vocab", type=int)
p.add_argument("--header-count", type=int)
p.add_argument("--wide", action="store_true")
p.add_argument("--magic", type=int)
p.add_argument("--version", type=int)
a = p.parse_args()
if a.magic is None:
    a.magic = 20240801 if a.wide else 20240520
if a.version is None:
    a.version = 7 if a.wide else 1
state, tokens = 12345, []
for _ in range(a.count):
    state = (state * 1103515245 + 12345) % (1 << 31)
    tokens.append((len(tokens) * 3 + (state >> 16) % 3) % a.vocab)
header = [a.magic, a.version, a.count if a.header_count is None else a.header_count] + [0] * 253
with open(a.out, "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack(f"<{a.count}{'I' if a.wide else 'H'}", *tokens))

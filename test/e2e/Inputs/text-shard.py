"""Writes FILE's bytes as an llm.c token shard (magic 20240520, version 1):
text read as a vocabulary of 256.

  text-shard.py IN OUT
"""
import struct
import sys

data = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(data), *([0] * 253)))
    f.write(struct.pack(f"<{len(data)}H", *data))

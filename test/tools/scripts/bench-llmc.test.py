"""Checks what scripts/llmc-files.py wrote under DIR/v1 and DIR/v3 from
CHECKPOINT (version 3) and TEXT, against both.

    bench-llmc.test.py CHECKPOINT TEXT DIR"""
import struct
import sys
from pathlib import Path

checkpoint, text, out = sys.argv[1:4]
original = Path(checkpoint).read_bytes()
data = Path(text).read_bytes()
split = len(data) * 9 // 10
out = Path(out)
header = struct.unpack_from("<256i", original)
vocab, width, padded = header[3], header[6], header[7]


def check(condition, what):
    if not condition:
        sys.exit(f"wrong: {what}")


v1 = (out / "v1/gpt2_124M.bin").read_bytes()
h1 = struct.unpack_from("<256i", v1)
check(h1[:7] == (20240326, 1) + header[2:7], "v1 header")
rows = vocab * width * 4
check(v1[1024:1024 + rows] == original[1024:1024 + rows], "v1 embedding")
check(v1[1024 + rows:] == original[1024 + padded * width * 4:], "v1 rest")
print(f"v1 checkpoint: version 1, {vocab} embedding rows of {padded}, "
      "the rest equal")
for name, part in (("train", data[:split]), ("val", data[split:])):
    tokens = (out / f"v1/data/tiny_shakespeare_{name}.bin").read_bytes()
    check(list(struct.unpack(f"<{len(part)}i", tokens)) == list(part),
          f"v1 {name} tokens")
print("v1 tokens: bare int32, 9:1, equal to the text")

check((out / "v3/gpt2_124M.bin").read_bytes() == original, "v3 checkpoint")
print("v3 checkpoint: unchanged")


def shard(path):
    raw = path.read_bytes()
    head = struct.unpack_from("<256i", raw)
    check(head[:3] == (20240520, 1, (len(raw) - 1024) // 2), f"{path} header")
    return list(struct.unpack_from(f"<{head[2]}H", raw, 1024))


base = out / "v3/dev/data/tinyshakespeare"
check(shard(base / "tiny_shakespeare_train.bin") == list(data[:split]), "v3 train")
check(shard(base / "tiny_shakespeare_val.bin") == list(data[split:]), "v3 val")
print("v3 tokens: shards, 9:1, equal to the text")
check(shard(out / "v1/loom-train.bin") == list(data[:split]), "loom-train.bin")
print("loom-train.bin: the training shard")

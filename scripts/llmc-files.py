"""Writes the files llm.c's CPU trainer (train_gpt2.c) reads, from a Loom
checkpoint and a text, in the formats of the train_gpt2.c given:

  llmc-files.py TRAIN_GPT2_C CHECKPOINT TEXT OUT_DIR

- OUT_DIR/gpt2_124M.bin: CHECKPOINT (llm.c's version 3, as `loom-run --save`
  writes it) in the version TRAIN_GPT2_C checks: 3 as it is, or 1, the early
  one, without the embedding's padded rows.
- The training and validation tokens at the paths TRAIN_GPT2_C opens: TEXT's
  bytes (a vocabulary of 256, inside GPT-2's) split 9:1, as a token shard
  (magic 20240520, uint16) where TRAIN_GPT2_C reads shards, as bare int32
  where it is the early version; and OUT_DIR/loom-train.bin, the same training
  tokens as a shard for loom-run's --data.

Prints the training file's path, relative to OUT_DIR."""
import re
import struct
import sys
from pathlib import Path

source_path, checkpoint, text, out = sys.argv[1:5]
source = Path(source_path).read_text()
out = Path(out)


def fail(message):
    sys.exit(f"llmc-files.py: {source_path}: {message}")


versions = set(re.findall(r"model_header\[1\] != (\d+)", source))
if len(versions) != 1 or versions - {"1", "3"}:
    fail(f"checks checkpoint versions {sorted(versions) or 'none'}; "
         "version 1 or 3 is written")
version = int(versions.pop())
train_paths = re.findall(r'"([^"]*tiny_shakespeare_train\.bin)"', source)
if not train_paths:
    fail("opens no tiny_shakespeare_train.bin")
train_path = train_paths[0]
val_path = train_path.replace("_train.bin", "_val.bin")
shards = "20240520" in source

raw = Path(checkpoint).read_bytes()
header = list(struct.unpack_from("<256i", raw))
if header[:2] != [20240326, 3]:
    sys.exit(f"llmc-files.py: {checkpoint}: not a version 3 llm.c checkpoint")
max_t, vocab, layers, heads, width, padded = header[2:8]
body = memoryview(raw)[1024:]
if version == 1:
    # Version 1 stores the embedding's vocab rows only: drop the padding.
    header[1] = 1
    header[7] = 0
    body = bytes(body[: vocab * width * 4]) + bytes(body[padded * width * 4:])
(out / "gpt2_124M.bin").write_bytes(struct.pack("<256i", *header) + bytes(body))

data = Path(text).read_bytes()
split = len(data) * 9 // 10


def shard(tokens):
    head = struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253))
    return head + struct.pack(f"<{len(tokens)}H", *tokens)


for path, tokens in ((train_path, data[:split]), (val_path, data[split:])):
    target = out / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(shard(tokens) if shards
                       else struct.pack(f"<{len(tokens)}i", *tokens))
(out / "loom-train.bin").write_bytes(shard(data[:split]))
print(train_path)

"""Reads back a directory scripts/prepare-data.py wrote and checks it
against the documents it was given, independently of the script: the
shards' llm.c headers and sizes, meta.json, an end-of-text token before
each document, each document's tokens decoding to its text, and the split.

  check-data.py DIR --tokenizer tokenizer.json --val N --shard-tokens N
                [--eot TOKEN] DOCUMENT...

DOCUMENTs are the expected documents in order: a text file is one, a .jsonl
file one per line with a non-empty "text". Prints a summary line, or the
first difference and exits 1.
"""
import argparse
import filecmp
import json
import os
import struct
import sys

from tokenizers import Tokenizer

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("documents", nargs="+")
p.add_argument("--tokenizer", required=True)
p.add_argument("--val", type=int, required=True)
p.add_argument("--shard-tokens", type=int, required=True)
p.add_argument("--eot", default="<|endoftext|>")
a = p.parse_args()


def fail(message):
    print(f"check-data: {message}")
    sys.exit(1)


def expect(what, got, want):
    if got != want:
        fail(f"{what}: {got!r}, expected {want!r}")


def expected_documents(paths):
    docs = []
    for path in paths:
        if path.endswith(".jsonl"):
            for line in open(path, encoding="utf-8"):
                if line.strip() and json.loads(line)["text"]:
                    docs.append(json.loads(line)["text"])
        else:
            docs.append(open(path, "rb").read().decode("utf-8"))
    return docs


def read_shard(path, token_bytes):
    data = open(path, "rb").read()
    header = struct.unpack("<256i", data[:1024])
    magic, version = (20240520, 1) if token_bytes == 2 else (20240801, 7)
    expect(f"{path}: magic and version", header[:2], (magic, version))
    expect(f"{path}: header past the count", set(header[3:]), {0})
    count = header[2]
    expect(f"{path}: bytes", len(data), 1024 + token_bytes * count)
    return list(struct.unpack(f"<{count}{'H' if token_bytes == 2 else 'I'}", data[1024:]))


def read_split(meta, split):
    tokens = []
    shards = meta[split]["shards"]
    for i, name in enumerate(shards):
        expect(f"{split} shard {i}", name, f"{split}_{i:06d}.bin")
        shard = read_shard(os.path.join(a.dir, name), meta["token_bytes"])
        if len(shard) > a.shard_tokens or (i < len(shards) - 1 and len(shard) != a.shard_tokens):
            fail(f"{name}: {len(shard)} tokens in a shard of at most {a.shard_tokens}, "
                 "every one but the last full")
        tokens += shard
    expect(f"{split} tokens", meta[split]["tokens"], len(tokens))
    return tokens


def split_documents(tokens, eot, split):
    if tokens and tokens[0] != eot:
        fail(f"{split}: starts with token {tokens[0]}, not the end of text {eot}")
    docs, current = [], None
    for token in tokens:
        if token == eot:
            current = []
            docs.append(current)
        else:
            current.append(token)
    return docs


tokenizer = Tokenizer.from_file(a.tokenizer)
eot = tokenizer.token_to_id(a.eot)
vocab = tokenizer.get_vocab_size(with_added_tokens=True)
meta = json.load(open(os.path.join(a.dir, "meta.json")))
expect("meta format", (meta["format"], meta["version"]), ("loom-data", 1))
expect("meta tokenizer", meta["tokenizer"], {"kind": "tokenizers", "file": "tokenizer.json"})
if not filecmp.cmp(os.path.join(a.dir, "tokenizer.json"), a.tokenizer, shallow=False):
    fail("the directory's tokenizer.json is not a copy of the tokenizer")
expect("meta vocab_size", meta["vocab_size"], vocab)
expect("meta eot_token", meta["eot_token"], eot)
expect("meta token_bytes", meta["token_bytes"], 2 if vocab <= 65536 else 4)
files = sorted(os.listdir(a.dir))
# The test's tokenizers are byte-level BPE with GPT-2's pre-tokenizer, so
# bpe.txt is written for loom-run's text prompts.
expect("files", files, sorted(meta["train"]["shards"] + meta["val"]["shards"]
                              + ["bpe.txt", "meta.json", "tokenizer.json", "vocab.hex"]))
with open(os.path.join(a.dir, "bpe.txt")) as f:
    expect("bpe.txt header", [f.readline().rstrip("\n") for _ in range(2)],
           [f"loom-bpe 1 {vocab}", "pattern gpt2"])

with open(os.path.join(a.dir, "vocab.hex")) as f:
    header, *lines = f.read().splitlines()
expect("vocab.hex header", header, f"loom-vocab 1 {vocab} {eot}")
expect("vocab.hex tokens", len(lines), vocab)
token_bytes = [bytes.fromhex(line) for line in lines]

want = expected_documents(a.documents)
got = []
for split in ("train", "val"):
    docs = split_documents(read_split(meta, split), eot, split)
    expect(f"{split} documents", meta[split]["documents"], len(docs))
    got.append(docs)
expect("val documents", len(got[1]), a.val)
documents = got[0] + got[1]
expect("documents", len(documents), len(want))
for i, (ids, text) in enumerate(zip(documents, want)):
    if max(ids, default=0) >= vocab:
        fail(f"document {i}: a token outside the vocabulary")
    expect(f"document {i}", tokenizer.decode(ids, skip_special_tokens=False), text)
    # vocab.hex, loom-run's way back from tokens to text: each token's
    # bytes, joined, are the document's.
    expect(f"document {i} from vocab.hex", b"".join(token_bytes[t] for t in ids),
           text.encode("utf-8"))
shards = len(meta["train"]["shards"]) + len(meta["val"]["shards"])
print(f"data: {len(documents)} documents (train {len(got[0])}, val {len(got[1])}), "
      f"{meta['train']['tokens'] + meta['val']['tokens']} tokens in {shards} shards "
      f"of {8 * meta['token_bytes']}-bit tokens, as written")

"""Decodes a prepare-data.py directory's shards with its vocab.hex (each
token's bytes) and checks them against the documents: an end-of-text token
before each, then its bytes. With --tokenizer-json, also that the
directory's tokenizer.json (loaded by the tokenizers package) encodes each
document to the same tokens.

    decode-shards.py DIR [--tokenizer-json] DOCUMENT...
"""
import json
import os
import sys

import numpy as np


def main():
    directory, documents = sys.argv[1], sys.argv[2:]
    check_json = documents[:1] == ["--tokenizer-json"]
    documents = documents[1:] if check_json else documents
    meta = json.load(open(os.path.join(directory, "meta.json")))
    with open(os.path.join(directory, meta["vocab_file"])) as f:
        lines = f.read().splitlines()
    table = [bytes.fromhex(line) for line in lines[1:]]
    dtype = np.uint16 if meta["token_bytes"] == 2 else np.uint32
    tokens = []
    for split in ("train", "val"):
        for shard in meta[split]["shards"]:
            data = np.fromfile(os.path.join(directory, shard), dtype=dtype)
            # After llm.c's header of 256 int32.
            tokens += data[1024 // meta["token_bytes"]:].tolist()
    eot = meta["eot_token"]
    texts, current, ids = [], None, []
    for token in tokens:
        if token == eot:
            current = bytearray()
            texts.append(current)
            ids.append([])
        elif current is None:
            sys.exit("the shards do not start with the end-of-text token")
        else:
            current += table[token]
            ids[-1].append(token)
    expected = [open(path, "rb").read() for path in documents]
    if [bytes(t) for t in texts] != expected:
        sys.exit(f"{len(texts)} documents decoded, differing from the {len(expected)} given")
    if check_json:
        import tokenizers
        tokenizer = tokenizers.Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        for path, expected_ids in zip(documents, ids):
            text = open(path, "rb").read().decode("utf-8")
            if tokenizer.encode(text).ids != expected_ids:
                sys.exit(f"tokenizer.json encodes {path} to other tokens")
            if tokenizer.decode(expected_ids) != text:
                sys.exit(f"tokenizer.json decodes {path}'s tokens to another text")
    print(f"{len(texts)} documents, {len(tokens)} tokens, decoded to their text"
          + (", tokenizer.json agrees" if check_json else ""))


main()

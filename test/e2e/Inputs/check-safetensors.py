"""Fails unless a safetensors export (loom-run --export-safetensors) holds
exactly Hugging Face GPT-2's tensors (GPT2LMHeadModel's state dict, the tied
lm_head left out), each with HF's shape and values equal to the llm.c
checkpoint's: wte without its padded rows, the blocks' four Conv1D weights
transposed to (in, out), everything else as it is.

usage: check-safetensors.py EXPORT CHECKPOINT"""
import json
import struct
import sys

import numpy as np
from safetensors.numpy import load_file


def read_checkpoint(path):
    data = open(path, "rb").read()
    header = np.frombuffer(data, dtype="<i4", count=256)
    magic, version, maxT, V, L, NH, C, Vp = (int(x) for x in header[:8])
    if magic != 20240326 or version != 3:
        sys.exit(f"{path}: not a version 3 llm.c checkpoint")
    shapes = [
        ("wte", (Vp, C)), ("wpe", (maxT, C)),
        ("ln1w", (L, C)), ("ln1b", (L, C)),
        ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)),
        ("attprojw", (L, C, C)), ("attprojb", (L, C)),
        ("ln2w", (L, C)), ("ln2b", (L, C)),
        ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
        ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
        ("lnfw", (C,)), ("lnfb", (C,)),
    ]
    params = np.frombuffer(data, dtype="<f4", offset=1024)
    tensors, at = {}, 0
    for name, shape in shapes:
        size = int(np.prod(shape))
        tensors[name] = params[at:at + size].reshape(shape)
        at += size
    if at != params.size:
        sys.exit(f"{path}: {params.size} parameters, the header describes {at}")
    return (V, L), tensors


def expected(V, L, t):
    """The HF state dict the checkpoint corresponds to, in HF's order."""
    hf = {
        "transformer.wte.weight": t["wte"][:V],
        "transformer.wpe.weight": t["wpe"],
    }
    # GPT-2's per-layer names, llm.c's tensors, and whether the tensor is a
    # Conv1D weight: (in, out), llm.c's (out, in) transposed.
    block = [("ln_1.weight", "ln1w", False), ("ln_1.bias", "ln1b", False),
             ("attn.c_attn.weight", "qkvw", True), ("attn.c_attn.bias", "qkvb", False),
             ("attn.c_proj.weight", "attprojw", True), ("attn.c_proj.bias", "attprojb", False),
             ("ln_2.weight", "ln2w", False), ("ln_2.bias", "ln2b", False),
             ("mlp.c_fc.weight", "fcw", True), ("mlp.c_fc.bias", "fcb", False),
             ("mlp.c_proj.weight", "fcprojw", True), ("mlp.c_proj.bias", "fcprojb", False)]
    for l in range(L):
        for name, llmc, conv1d in block:
            hf[f"transformer.h.{l}.{name}"] = t[llmc][l].T if conv1d else t[llmc][l]
    hf["transformer.ln_f.weight"] = t["lnfw"]
    hf["transformer.ln_f.bias"] = t["lnfb"]
    return hf


def check_header(path):
    """What the safetensors package does not insist on: the header's
    padding to 8 bytes and its metadata."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    if (8 + n) % 8:
        sys.exit(f"{path}: header of {n} bytes leaves the data unaligned")
    header = json.loads(data[8:8 + n])
    if header.get("__metadata__") != {"format": "pt"}:
        sys.exit(f"{path}: metadata {header.get('__metadata__')!r}, "
                 "expected {'format': 'pt'}")
    for name, info in header.items():
        if name != "__metadata__" and info["dtype"] != "F32":
            sys.exit(f"{path}: {name} is {info['dtype']}, expected F32")


export_path, checkpoint_path = sys.argv[1], sys.argv[2]
check_header(export_path)
got = load_file(export_path)
(V, L), tensors = read_checkpoint(checkpoint_path)
want = expected(V, L, tensors)
if set(got) != set(want):
    sys.exit(f"tensor names differ: missing {sorted(set(want) - set(got))}, "
             f"unexpected {sorted(set(got) - set(want))}")
for name, value in want.items():
    if got[name].dtype != np.float32 or got[name].shape != value.shape:
        sys.exit(f"{name}: {got[name].dtype} {got[name].shape}, expected "
                 f"float32 {value.shape}")
    if not np.array_equal(got[name], value):
        diff = np.abs(got[name] - value).max()
        sys.exit(f"{name}: values differ from the checkpoint's (largest "
                 f"difference {diff:g})")
print(f"safetensors: {len(got)} tensors, all equal to the checkpoint")

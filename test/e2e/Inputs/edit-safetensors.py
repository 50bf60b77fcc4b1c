"""Writes a copy of a safetensors file with one change, to test how a
reader meets a file that does not fit its model.

usage: edit-safetensors.py IN OUT (--drop NAME | --add NAME | --reshape NAME
                                   | --dtype NAME | --index)

--drop leaves NAME out; --add adds a small tensor NAME; --reshape drops the
last row of NAME; --dtype stores NAME as I64; --index splits the file into
two shards in OUT's directory with OUT as their Hugging Face index."""
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

src, out, what = sys.argv[1], sys.argv[2], sys.argv[3]
name = sys.argv[4] if len(sys.argv) > 4 else None
tensors = load_file(src)
if what == "--drop":
    del tensors[name]
elif what == "--add":
    tensors[name] = np.zeros((2,), np.float32)
elif what == "--reshape":
    tensors[name] = np.ascontiguousarray(tensors[name][:-1])
elif what == "--dtype":
    tensors[name] = tensors[name].astype(np.int64)
elif what == "--index":
    names = sorted(tensors)
    half = len(names) // 2
    directory = os.path.dirname(out) or "."
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:])):
        shard = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, os.path.join(directory, shard))
        weight_map.update({n: shard for n in part})
    json.dump({"metadata": {}, "weight_map": weight_map}, open(out, "w"))
    sys.exit(0)
else:
    sys.exit(f"unknown edit {what}")
save_file(tensors, out)

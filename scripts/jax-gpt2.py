#!/usr/bin/env python3
"""An independent GPT-2 trainer in JAX, for checking Loom's numerics.

  jax-gpt2.py MODEL.json --load CKPT --data FILE [--steps N]
              [--precision fp32|bf16] [--lr X] [--val-fraction F]
              [--save CKPT]

It trains the model of a Loom model description (its `model` and
`training`: batch, sequence, AdamW's hyperparameters, the clipping norm)
from an llm.c checkpoint (version 3, fp32: what `loom-run --load` reads) on
the batches `loom-run --data FILE` takes (text as bytes or an llm.c token
shard, the last `--val-fraction` held out, windows of sequence + 1 tokens
read in order), and prints each step as loom-run does, so that
test/e2e/Inputs/compare-losses.py compares the two:

  step     1/10 | loss 5.759032 | norm 7.176119

It shares no code with Loom. `--precision bf16` is mixed precision as
PyTorch's autocast does it for a GPT-2 (nanoGPT's, with bf16 autocast):
f32 master weights and optimizer, each linear's operands rounded to bf16
and its f32 product (with the bias) rounded once, attention and GELU on the
bf16 tensors computing in f32 and rounding their results, layer norms and
the loss in f32, and the residual stream in f32 (an f32 tensor plus a bf16
one is f32). Loom keeps the residual stream in bf16 (docs/precision.md),
so the two round differently; what they share is how far a bf16 run
drifts from fp32.

Needs JAX (`pip install "jax[cpu]"`); runs on the CPU.
"""
import argparse
import json
import math
import struct
import sys

try:
    import numpy as np
    import jax
    import jax.numpy as jnp
except ImportError as err:
    # Run it as build/bin/loom-python scripts/jax-gpt2.py (docs/python.md).
    sys.exit(f"jax-gpt2.py: {sys.executable} has no {err.name}: run it with "
             "the interpreter scripts/setup.sh installed JAX into, "
             "build/bin/loom-python")

jax.config.update("jax_platforms", "cpu")
# XLA's CPU matrix products are f32 unless told otherwise; say so anyway,
# so that fp32 means f32 sums everywhere.
jax.config.update("jax_default_matmul_precision", "highest")

LLMC_MAGIC, SHARD_MAGIC = 20240326, 20240520
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw",
         "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb",
         "lnfw", "lnfb"]


def fail(msg):
    sys.exit(f"jax-gpt2.py: {msg}")


def load_checkpoint(path, model):
    try:
        raw = open(path, "rb").read()
    except OSError as err:
        fail(f"{path}: {err.strerror}")
    if len(raw) < 1024:
        fail(f"{path}: no complete 256-int llm.c header")
    header = struct.unpack("<256i", raw[:1024])
    if header[0] != LLMC_MAGIC or header[1] != 3:
        fail(f"{path}: not an fp32 llm.c checkpoint (magic {header[0]}, "
             f"version {header[1]}; want {LLMC_MAGIC}, 3)")
    maxT, V, L, NH, C, Vp = header[2:8]
    want = (model["n_positions"], model["vocab_size"], model["n_layer"],
            model["n_head"], model["n_embd"])
    if (maxT, V, L, NH, C) != want:
        fail(f"{path}: holds positions, vocab, layers, heads, width "
             f"{(maxT, V, L, NH, C)}; the model description says {want}")
    shapes = {
        "wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C),
        "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C),
        "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C),
        "fcw": (L, 4 * C, C), "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C),
        "fcprojb": (L, C), "lnfw": (C,), "lnfb": (C,),
    }
    values = np.frombuffer(raw, dtype="<f4", offset=1024)
    need = sum(math.prod(s) for s in shapes.values())
    if values.size != need:
        fail(f"{path}: holds {values.size} floats after its header; the "
             f"model needs {need}")
    params, at = {}, 0
    for name in NAMES:
        n = math.prod(shapes[name])
        params[name] = jnp.asarray(values[at:at + n].reshape(shapes[name]))
        at += n
    return params, header, V, NH


def save_checkpoint(path, header, params):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        for name in NAMES:
            f.write(np.asarray(params[name], dtype="<f4").tobytes())


def load_tokens(path):
    try:
        raw = open(path, "rb").read()
    except OSError as err:
        fail(f"{path}: {err.strerror}")
    if len(raw) >= 4 and struct.unpack("<i", raw[:4])[0] == SHARD_MAGIC:
        if len(raw) < 1024:
            fail(f"{path}: truncated llm.c token shard: no complete header")
        count = struct.unpack("<256i", raw[:1024])[2]
        if count < 0 or len(raw) != 1024 + 2 * count:
            fail(f"{path}: the header promises {count} tokens but the file "
                 f"holds {len(raw) - 1024} bytes of tokens")
        return np.frombuffer(raw, dtype="<u2", offset=1024).astype(np.int32)
    return np.frombuffer(raw, dtype=np.uint8).astype(np.int32)


def batches(tokens, end, batch, seq):
    """loom-run's training batches: consecutive windows from the start of
    the training range, back to its start when one would pass its end."""
    cursor = 0
    while True:
        x = np.empty((batch, seq), np.int32)
        y = np.empty((batch, seq), np.int32)
        for b in range(batch):
            if cursor + seq + 1 > end:
                cursor = 0
            x[b] = tokens[cursor:cursor + seq]
            y[b] = tokens[cursor + 1:cursor + seq + 1]
            cursor += seq
        yield x, y


def make_loss(V, NH, low):
    """The mean cross-entropy of GPT-2 on one batch. With `low` (bf16),
    mixed precision as autocast does it (the module's docstring)."""
    f32 = jnp.float32

    def linear(x, w, b=None):
        if low:
            y = jnp.einsum("...k,nk->...n", x.astype(low), w.astype(low),
                           preferred_element_type=f32)
            if b is not None:
                y = y + b.astype(low).astype(f32)
            return y.astype(low)
        y = jnp.einsum("...k,nk->...n", x, w)
        return y if b is None else y + b

    def layer_norm(x, w, b):
        x = x.astype(f32)
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * w + b

    def gelu(x):
        u = x.astype(f32)
        y = 0.5 * u * (1 + jnp.tanh(math.sqrt(2 / math.pi) *
                                    (u + 0.044715 * u ** 3)))
        return y.astype(x.dtype)

    def attention(qkv):
        B, T, C3 = qkv.shape
        C = C3 // 3
        hd = C // NH
        q, k, v = (qkv[..., i * C:(i + 1) * C].astype(f32)
                   .reshape(B, T, NH, hd).transpose(0, 2, 1, 3)
                   for i in range(3))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
        mask = jnp.tril(jnp.ones((T, T), bool))
        scores = jnp.where(mask, scores, -jnp.inf)
        y = jax.nn.softmax(scores, axis=-1) @ v
        y = y.transpose(0, 2, 1, 3).reshape(B, T, C)
        return y.astype(qkv.dtype)

    def loss(p, x, y):
        T = x.shape[1]
        h = p["wte"][x] + p["wpe"][:T]
        for l in range(p["ln1w"].shape[0]):
            a = layer_norm(h, p["ln1w"][l], p["ln1b"][l])
            a = attention(linear(a, p["qkvw"][l], p["qkvb"][l]))
            h = h + linear(a, p["attprojw"][l], p["attprojb"][l]).astype(f32)
            m = layer_norm(h, p["ln2w"][l], p["ln2b"][l])
            m = gelu(linear(m, p["fcw"][l], p["fcb"][l]))
            h = h + linear(m, p["fcprojw"][l], p["fcprojb"][l]).astype(f32)
        h = layer_norm(h, p["lnfw"], p["lnfb"])
        logits = linear(h, p["wte"]).astype(f32)[..., :V]
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, y[..., None], -1).mean()

    return loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--load", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--lr", type=float)
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--save", help="write an llm.c checkpoint after the "
                    "last step")
    a = ap.parse_args()

    if a.steps < 0:
        fail(f"--steps {a.steps}: not a count of steps")
    try:
        desc = json.load(open(a.model))
        model, training = desc["model"], desc["training"]
        opt = training["optimizer"]
        batch, seq = training["batch_size"], training["sequence_length"]
        for key in ("n_positions", "vocab_size", "n_layer", "n_head",
                    "n_embd"):
            if not isinstance(model[key], int):
                raise TypeError(f"model.{key} is not an integer")
    except OSError as err:
        fail(f"{a.model}: {err.strerror}")
    except (ValueError, KeyError, TypeError) as err:
        fail(f"{a.model}: not a model description with model and "
             f"training.optimizer ({err!r})")
    if opt.get("type", "adamw") != "adamw":
        fail(f"{a.model}: training.optimizer.type: only adamw is trained")
    lr = a.lr if a.lr is not None else opt["learning_rate"]
    beta1, beta2 = opt.get("beta1", 0.9), opt.get("beta2", 0.999)
    eps, wd = opt.get("epsilon", 1e-8), opt.get("weight_decay", 0.0)
    clip = training.get("grad_clip", 0.0)

    params, header, V, NH = load_checkpoint(a.load, model)
    tokens = load_tokens(a.data)
    if tokens.size and tokens.max() >= V:
        fail(f"{a.data}: token {tokens.max()} is outside the vocabulary of "
             f"{V}")
    end = tokens.size - int(tokens.size * a.val_fraction)
    if end < seq + 1:
        fail(f"{a.data}: {tokens.size} tokens are too few for one sequence "
             f"of {seq} and its targets")

    low = jnp.bfloat16 if a.precision == "bf16" else None
    grad_fn = jax.value_and_grad(make_loss(V, NH, low))

    @jax.jit
    def step(p, m, v, t, x, y):
        loss, g = grad_fn(p, x, y)
        norm = jnp.sqrt(sum(jnp.sum(gi.astype(jnp.float32) ** 2)
                            for gi in jax.tree_util.tree_leaves(g)))
        scale = jnp.minimum(clip / (norm + 1e-6), 1.0) if clip > 0 else 1.0
        new_p, new_m, new_v = {}, {}, {}
        for k in p:
            gk = g[k] * scale
            new_m[k] = beta1 * m[k] + (1 - beta1) * gk
            new_v[k] = beta2 * v[k] + (1 - beta2) * gk * gk
            mhat = new_m[k] / (1 - beta1 ** t)
            vhat = new_v[k] / (1 - beta2 ** t)
            new_p[k] = p[k] - lr * (mhat / (jnp.sqrt(vhat) + eps) + wd * p[k])
        return new_p, new_m, new_v, loss, norm

    m = {k: jnp.zeros_like(w) for k, w in params.items()}
    v = {k: jnp.zeros_like(w) for k, w in params.items()}
    data = batches(tokens, end, batch, seq)
    for t in range(1, a.steps + 1):
        x, y = next(data)
        params, m, v, loss, norm = step(params, m, v, jnp.float32(t), x, y)
        print(f"step {t:5d}/{a.steps} | loss {float(loss):.6f} | "
              f"norm {float(norm):.6f}", flush=True)
    if a.save:
        save_checkpoint(a.save, header, params)


if __name__ == "__main__":
    main()

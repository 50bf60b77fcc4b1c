"""Greedy continuation of a GPT-2 from a safetensors file with
GPT2LMHeadModel's names (loom-run --export-safetensors writes them),
computed in NumPy (float64) independently of Loom: the oracle of
loom-run --generate's tokens.

    numpy-gpt2.py MODEL.safetensors HEADS PROMPT_TOKENS COUNT

Prints the prompt and continuation as text, each token a byte (a model of
bytes), bytes below 0x20 but newline and tab as \\xHH."""
import sys

import numpy as np
from safetensors.numpy import load_file


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def logits(t, heads, tokens):
    T = len(tokens)
    x = t["transformer.wte.weight"][tokens] + t["transformer.wpe.weight"][:T]
    C = x.shape[1]
    D = C // heads
    layers = 1 + max(int(k.split(".")[2]) for k in t if k.startswith("transformer.h."))
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(layers):
        p = f"transformer.h.{l}."
        h = layer_norm(x, t[p + "ln_1.weight"], t[p + "ln_1.bias"])
        qkv = h @ t[p + "attn.c_attn.weight"] + t[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(T, heads, D).transpose(1, 0, 2) for i in range(3))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        a = a.transpose(1, 0, 2).reshape(T, C)
        x = x + a @ t[p + "attn.c_proj.weight"] + t[p + "attn.c_proj.bias"]
        h = layer_norm(x, t[p + "ln_2.weight"], t[p + "ln_2.bias"])
        h = gelu(h @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"])
        x = x + h @ t[p + "mlp.c_proj.weight"] + t[p + "mlp.c_proj.bias"]
    x = layer_norm(x, t["transformer.ln_f.weight"], t["transformer.ln_f.bias"])
    return x @ t["transformer.wte.weight"].T


def main():
    t = {k: v.astype(np.float64) for k, v in load_file(sys.argv[1]).items()}
    heads = int(sys.argv[2])
    tokens = [int(x) for x in sys.argv[3].split(",")]
    context = t["transformer.wpe.weight"].shape[0]
    for _ in range(int(sys.argv[4])):
        scores = logits(t, heads, tokens[-context:])[-1]
        tokens.append(int(np.argmax(scores)))
    text = "".join(chr(c) if c >= 0x20 or c in (9, 10) else f"\\x{c:02x}" for c in tokens)
    # Bytes as Latin-1 code points print as the bytes loom-run writes.
    sys.stdout.buffer.write(text.encode("latin-1") + b"\n")


main()

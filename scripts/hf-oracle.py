"""Writes a small random GPT-2, Llama or Qwen2 with Hugging Face transformers,
and its first training steps in PyTorch: the fixtures of
test/e2e/hf-transformers.test.

    hf-oracle.py {gpt2,llama,llama-bias,qwen2} OUT_DIR --data FILE [--steps N]

OUT_DIR receives config.json and model.safetensors (transformers'
save_pretrained, f32) and expected.log: the steps as loom-run prints them
(loss and global gradient norm), of AdamW with the hyperparameters Loom
gives a Hugging Face config.json (learning rate 3e-4, betas 0.9 and 0.95,
epsilon 1e-8, no weight decay, no clipping) on the batches
`loom-run --data FILE` takes (text as bytes: consecutive windows of the
first 90%). The loss is the mean cross-entropy of the logits against the
next tokens, as Loom computes it, in f32 on the CPU.

Needs torch and transformers (not installed by setup: the fixtures are
committed); run with an interpreter that has them.
"""
import argparse
import os

import numpy as np
import torch
import transformers

BATCH, SEQ = 4, 32


def config(family):
    if family == "gpt2":
        # No dropout, weights from N(0, 0.2) as for the others.
        return transformers.GPT2Config(
            vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=4,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            initializer_range=0.2)
    return llama_config(family)


def llama_config(family):
    """Llama with as many key/value heads as query heads and Llama 3's
    rotary scaling; Llama with grouped-query attention and biases on every
    projection (attention_bias, mlp_bias); Qwen2 with grouped-query
    attention (2 key/value heads for 4) and its q/k/v biases."""
    common = dict(vocab_size=256, hidden_size=32, intermediate_size=88,
                  num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=64, rms_norm_eps=1e-5,
                  tie_word_embeddings=False, initializer_range=0.2)
    if family == "llama":
        # Llama 3.1's frequency scaling, its bands placed so that the head's
        # four frequencies fall in all three: kept, blended, divided.
        rope = dict(rope_type="llama3", rope_theta=10000.0, factor=8.0,
                    low_freq_factor=1.0, high_freq_factor=4.0,
                    original_max_position_embeddings=64)
        return transformers.LlamaConfig(rope_parameters=rope,
                                        num_key_value_heads=4, **common)
    if family == "llama-bias":
        return transformers.LlamaConfig(rope_theta=10000.0, num_key_value_heads=2,
                                        attention_bias=True, mlp_bias=True, **common)
    return transformers.Qwen2Config(rope_theta=10000.0, num_key_value_heads=2,
                                    **common)


def batches(tokens, steps):
    """loom-run's training batches (scripts/jax-gpt2.py has the rule)."""
    end = tokens.size - int(tokens.size * 0.1)
    cursor = 0
    for _ in range(steps):
        x = np.empty((BATCH, SEQ), np.int64)
        y = np.empty((BATCH, SEQ), np.int64)
        for b in range(BATCH):
            if cursor + SEQ + 1 > end:
                cursor = 0
            x[b] = tokens[cursor:cursor + SEQ]
            y[b] = tokens[cursor + 1:cursor + SEQ + 1]
            cursor += SEQ
        yield torch.from_numpy(x), torch.from_numpy(y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("family", choices=["gpt2", "llama", "llama-bias", "qwen2"])
    ap.add_argument("out")
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    model = transformers.AutoModelForCausalLM.from_config(
        config(a.family), attn_implementation="eager").float()
    model.eval()  # no dropout; the gradients are the same
    # Biases start at zero; random ones test them (GPT-2's, Qwen2's q/k/v,
    # the biased Llama's).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.02)
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)

    tokens = np.frombuffer(open(a.data, "rb").read(), np.uint8)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95),
                            eps=1e-8, weight_decay=0.0)
    lines = []
    for t, (x, y) in enumerate(batches(tokens, a.steps), 1):
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum()
                              for p in model.parameters()))
        opt.step()
        lines.append(f"step {t:5d}/{a.steps} | loss {loss.item():.6f} | "
                     f"norm {norm.item():.6f}")
    with open(os.path.join(a.out, "expected.log"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

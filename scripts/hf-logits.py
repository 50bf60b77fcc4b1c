"""The next-token scores of a Hugging Face model directory (config.json and
model.safetensors, as transformers saves them) after each token of a
prompt, computed by transformers in fp32: the expected scores of
test/e2e/hf-transformers.test, written to DIR/logits.npy (tokens x vocab)
with the prompt's tokens in DIR/logits-tokens.txt.

    hf-logits.py DIR TEXT

Each token is a byte (the fixtures' models are of bytes). Needs torch and
transformers (not installed by setup: the fixtures are committed); run
with an interpreter that has them.
"""
import os
import sys

import numpy as np
import torch
import transformers


def main():
    directory, text = sys.argv[1], sys.argv[2]
    tokens = list(text.encode("utf-8"))
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        scores = model(torch.tensor([tokens])).logits[0]
    np.save(os.path.join(directory, "logits.npy"),
            scores.numpy().astype(np.float32))
    with open(os.path.join(directory, "logits-tokens.txt"), "w") as f:
        f.write(",".join(map(str, tokens)) + "\n")
    print(f"{len(tokens)} tokens x {scores.shape[1]} scores")


if __name__ == "__main__":
    main()

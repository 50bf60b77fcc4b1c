"""Greedy continuation of a prompt by a Hugging Face model directory
(config.json and model.safetensors, as transformers saves them), with
transformers' own `generate`: the expected text of loom-run --generate in
test/e2e/hf-transformers.test, written to DIR/generated.txt.

    hf-generate.py DIR PROMPT_TOKENS COUNT

Each token is a byte (the fixtures' models are of bytes); the text is
written as loom-run prints it, bytes below 0x20 but newline and tab as
\\xHH. Needs torch and transformers (not installed by setup: the fixtures
are committed); run with an interpreter that has them.
"""
import os
import sys

import torch
import transformers


def printable(tokens):
    return "".join(chr(c) if c >= 0x20 or c in (9, 10) else f"\\x{c:02x}" for c in tokens)


def main():
    directory, prompt, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    ids = torch.tensor([[int(t) for t in prompt.split(",")]])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=count, do_sample=False,
                             pad_token_id=0)
    text = printable(out[0].tolist())
    with open(os.path.join(directory, "generated.txt"), "wb") as f:
        f.write(text.encode("latin-1") + b"\n")
    print(text)


if __name__ == "__main__":
    main()

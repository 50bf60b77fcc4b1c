"""PyTorch's Llama training step as its users write it, to put Loom's CUDA
figures for a Llama-family model next to: Hugging Face's LlamaForCausalLM
(transformers) built from the model description's "model" section (the
same keys, examples/llama3.2-1b.json), attention through
F.scaled_dot_product_attention (attn_implementation="sdpa"), bf16 under
autocast, TF32 on, torch.optim.AdamW(fused=True) with weight decay on the
matrices alone, gradient clipping at 1.0, and the loss over the logits in
f32. Prints one line per mode (eager or compile: "compile-bf16" is
torch.compile(model)) in torch_gpt2.py's format: tokens/s, ms/step (median
of the timed steps, CUDA events), MFU against the given peak by Loom's
count (6 x parameters plus attention's 4 x layers x width x sequence per
token), peak memory and the last step's loss.

    python3 torch_llama.py examples/llama3.2-1b.json --batch 16 --seq 1024

--data FILE trains on FILE's bytes as tokens, in the batches loom-run takes
from it with --val-fraction 0 (torch_gpt2.py's make_batches); without it,
random tokens of the vocabulary. --profile N profiles N more steps
(torch_gpt2.py's).
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt2 import adamw, make_batches, make_step, time_steps  # noqa: E402


def run(mode, config, args):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**config, attn_implementation="sdpa",
                                         use_cache=False)).cuda()
    n_params = sum(p.numel() for p in model.parameters())
    compiled, dtype = mode.split("-")
    step_model = torch.compile(model) if compiled == "compile" else model

    def loss_of(idx, tgt):
        logits = step_model(input_ids=idx).logits
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))

    batches = make_batches(args, config["vocab_size"])
    step = make_step(loss_of, model, adamw(model, 3e-4), batches, dtype)
    time_steps(mode, step, args, n_params, config["num_hidden_layers"],
               config["hidden_size"])


parser = argparse.ArgumentParser()
parser.add_argument("model", help="a Loom model description of a Llama")
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seq", type=int, default=1024)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--modes", default="compile-bf16")
parser.add_argument("--data")
parser.add_argument("--profile", type=int, default=0, metavar="N")
parser.add_argument("--peak-fp32", type=float, default=67e12)
parser.add_argument("--peak-bf16", type=float, default=989e12)
args = parser.parse_args()
try:
    with open(args.model) as f:
        config = json.load(f)["model"]
except (OSError, ValueError, KeyError) as err:
    sys.exit(f"torch_llama.py: {args.model}: not a model description ({err})")
if config.get("model_type") != "llama":
    sys.exit(f"torch_llama.py: {args.model}: model_type is "
             f"{config.get('model_type')!r}, not 'llama'")
config = {k: v for k, v in config.items() if k != "model_type"}
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
for mode in args.modes.split(","):
    try:
        run(mode, config, args)
    except torch.cuda.OutOfMemoryError:
        print(f"torch {mode:13s} | out of memory at batch {args.batch} x {args.seq}")
        torch.cuda.empty_cache()

"""PyTorch's GPT-2 training step as its users write it, to put Loom's CUDA
figures next to: nanoGPT's recipe, the best configuration a user would
pick without writing kernels.

The same model shape as examples/gpt2-124m.json (or --layers, --width,
--heads): pre-layer-norm blocks with biases, F.scaled_dot_product_attention
(is_causal=True), GELU with tanh, the head tied to the token table and the
loss over the padded logits; torch.optim.AdamW(fused=True) with weight
decay on the matrices alone; TF32 on; bf16 under autocast; gradient
clipping at 1.0. Prints one line per mode (eager or compile, fp32 or bf16:
"compile-bf16" is torch.compile(model)): tokens/s, ms/step (median of the
timed steps, CUDA events), MFU against the given peak, peak memory (every
step's batch included) and the last step's loss.

    python3 torch_gpt2.py --batch 8 --seq 1024 --modes eager-fp32,compile-fp32

--padded-vocab N gives the token table N rows (llm.c's and nanoGPT's
50,304), as `loomc --pad-vocab` does; the loss covers them all, as
nanoGPT's does (slicing the logits to the vocabulary first copies them).

--data FILE trains on FILE's bytes as tokens, in the batches loom-run takes
from it with --val-fraction 0 (consecutive windows of sequence + 1 tokens,
from the start again when one would pass the end), so that the final loss
is comparable with loom-run's on the same file; without it, random tokens.
"""
import argparse
import math
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers=12, width=768, heads=12, vocab=50257, positions=1024,
                 padded_vocab=None):
        super().__init__()
        self.vocab, self.width = vocab, width
        self.wte = nn.Embedding(padded_vocab or vocab, width)
        self.wpe = nn.Embedding(positions, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def make_batches(args, vocab=50257):
    """Every step's (inputs, targets) on the GPU before the first step, so
    that no step waits for a copy: tokens under `vocab` at random, or
    --data's bytes."""
    count = args.warmup + args.steps + args.profile
    shape = (count, args.batch, args.seq)
    if not args.data:
        return list(zip(torch.randint(0, vocab, shape, device="cuda"),
                        torch.randint(0, vocab, shape, device="cuda")))
    try:
        with open(args.data, "rb") as f:
            text = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    except OSError as err:
        sys.exit(f"{sys.argv[0]}: {args.data}: {err.strerror}")
    if text.numel() < args.seq + 1:
        sys.exit(f"{sys.argv[0]}: {args.data}: {text.numel()} bytes are too few "
                 f"for one sequence of {args.seq} and its targets")
    # Window w starts where w - 1 ended, or at 0 when it would not fit.
    starts, cursor = [], 0
    for _ in range(count * args.batch):
        if cursor + args.seq + 1 > text.numel():
            cursor = 0
        starts.append(cursor)
        cursor += args.seq
    offsets = torch.tensor(starts).view(-1, 1) + torch.arange(args.seq + 1)
    windows = text[offsets].long().view(count, args.batch, args.seq + 1).cuda()
    return [(w[:, :-1].contiguous(), w[:, 1:].contiguous()) for w in windows]


def run(mode, args):
    torch.manual_seed(0)
    if args.padded_vocab < 50257:
        raise SystemExit(f"torch_gpt2.py: --padded-vocab {args.padded_vocab} is under the vocabulary's 50257")
    model = GPT(layers=args.layers, width=args.width, heads=args.heads,
                padded_vocab=args.padded_vocab).cuda()
    n_params = sum(p.numel() for p in model.parameters())
    opt = adamw(model, 6e-4)
    compiled, dtype = mode.split("-")
    step_model = torch.compile(model) if compiled == "compile" else model
    step = make_step(step_model, model, opt, make_batches(args), dtype)
    time_steps(mode, step, args, n_params, len(model.blocks), model.width)


def adamw(model, lr):
    """Fused AdamW in nanoGPT's groups: weight decay on the matrices, none
    on biases and the norms' vectors."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                              {"params": vectors, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), fused=True)


def make_step(loss_of, model, opt, batches, dtype):
    """One training step on the next batch: `loss_of(inputs, targets)`
    under bf16 autocast (dtype bf16), its gradient clipped at 1.0, the
    optimizer's update."""
    def step():
        idx, tgt = batches.pop(0)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            loss = loss_of(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def time_steps(mode, step, args, n_params, layers, width):
    """Runs --warmup steps, times --steps (CUDA events, the median), prints
    the mode's line and, with --profile N, profiles N more."""
    dtype = mode.split("-")[1]
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    ms = statistics.median(times)
    tokens = args.batch * args.seq
    # Loom's count (loom/abi.h, docs/cost-model.md): 6 x parameters plus
    # attention's 4 x layers x width x sequence per token.
    flops = tokens * (6 * n_params + 4 * layers * width * args.seq)
    peak = args.peak_bf16 if dtype == "bf16" else args.peak_fp32
    print(f"torch {mode:13s} | {tokens / ms * 1e3:10.0f} tok/s | {ms:8.2f} ms/step | "
          f"MFU {flops / (ms * 1e-3) / peak * 100:5.1f}% of {peak / 1e12:.0f} TFLOP/s | "
          f"peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB | loss {loss.item():.3f}")
    if args.profile:
        try:
            profile(mode, step, args.profile)
        except Exception as err:  # The timing above stands without it.
            print(f"torch {mode}: no profile: {err}")


# A kernel's kind by its name, first match: PyTorch's attention kernels
# (FlashAttention, cuDNN's, memory-efficient), cuBLAS's GEMMs, the fused
# optimizer, Inductor's generated Triton kernels.
KINDS = [("attention", ("flash", "fmha", "attention", "sdpa", "cudnn")),
         ("GEMMs", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "sm90_", "sm80_")),
         ("optimizer", ("adam", "multi_tensor", "foreach")),
         ("generated (Triton)", ("triton",))]


def profile(mode, step, steps):
    """Where the GPU's time goes: each kernel kind's time a step, and the
    busiest kernels, from the profiler's CUDA activity over `steps` steps."""
    from torch.profiler import ProfilerActivity, profile as profiler
    with profiler(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernels[e.name] = (kernels.get(e.name, 0.0) +
                               e.time_range.elapsed_us() / 1e3 / steps)
    kinds = {}
    for name, ms in kernels.items():
        kind = next((k for k, keys in KINDS if any(w in name.lower() for w in keys)), "other")
        kinds[kind] = kinds.get(kind, 0.0) + ms
    print(f"torch {mode}: GPU {sum(kernels.values()):.3f} ms/step by kind: " +
          ", ".join(f"{k} {v:.3f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))
    for name, ms in sorted(kernels.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {ms:9.3f} ms/step  {name[:110]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--modes", default="eager-fp32,eager-bf16")
    parser.add_argument("--padded-vocab", type=int, default=50257)
    parser.add_argument("--data", help="train on this file's bytes, as loom-run does")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="after the timed steps, N more under PyTorch's profiler: "
                             "the GPU's time a step by kind of kernel, and the busiest")
    # H100 SXM dense peaks: FP32 (CUDA cores) and BF16 tensor cores.
    parser.add_argument("--peak-fp32", type=float, default=67e12)
    parser.add_argument("--peak-bf16", type=float, default=989e12)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    for mode in args.modes.split(","):
        try:
            run(mode, args)
        except torch.cuda.OutOfMemoryError:
            # Loom's step may fit a batch that PyTorch's does not (bench-cuda.sh
            # sizes the batch for Loom's): say so, and go on to the next mode.
            total = torch.cuda.get_device_properties(0).total_memory
            print(f"torch {mode:13s} | out of memory at batch {args.batch} x {args.seq} "
                  f"({total / 2**20:.0f} MiB on the GPU)")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

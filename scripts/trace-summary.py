#!/usr/bin/env python3
"""Where a run's time goes, from `loom-run --trace`'s timeline.

    scripts/trace-summary.py run.json [--top N] [--skip-steps K]

Prints, for rank 0 (the trace's first process), the mean step time, then
per category of span (forward, backward, optimizer, communication, and on
a GPU the `gpu` track of kernels and GEMMs) the milliseconds per step, the
GPU's time by kind (GEMMs, the fused attention, the forward and backward
passes' generated kernels, the others), and the GPU's busiest kernels by
total time: each name's count per step, its milliseconds per step and its
share of the GPU's busy time. The first K
steps (default 1: compilation, first touches, cuBLASLt's planning) are left
out. Exit status 1, with the reason, for a file that is not such a trace.
"""

import argparse
import collections
import json
import sys


def fail(message):
    print(f"trace-summary: {message}", file=sys.stderr)
    sys.exit(1)


def kind_of(name):
    """What a GPU span is, from its name: a cuBLASLt GEMM, one of the
    fused attention's kernels, one of the token gradient's (the runtime's
    sorted scatter), the loss's softmax statistics (the runtime's), or a
    kernel generated for the forward or backward pass (named after the
    model part and pass it computes), or another (the optimizer's, among
    others)."""
    if name.startswith("GEMM"):
        return "GEMMs"
    if name.startswith("loom_attention_"):
        return "attention"
    if name.startswith("loom_scatter_"):
        return "token gradient"
    if name.startswith("loom_softmax_stats_"):
        return "loss statistics"
    for pass_name in ("forward", "backward"):
        if name.startswith(pass_name + "_"):
            return pass_name
    return "other"


def load(path, skip_steps):
    """Rank 0's spans of the steps after the first `skip_steps`: the rank,
    those steps, the microseconds by category of span, and each GPU
    span's name's count and microseconds."""
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not a loom-run trace ({e})")
    spans = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    if not spans:
        fail(f"{path}: no spans")
    pid = min(e.get("pid", 0) for e in spans)
    spans = [e for e in spans if e.get("pid", 0) == pid]
    steps = sorted((e for e in spans if e.get("cat") == "step"),
                   key=lambda e: e["ts"])
    kept = steps[skip_steps:]
    if not kept:
        fail(f"{path}: {len(steps)} steps, none left after skipping "
             f"{skip_steps}")
    windows = [(s["ts"], s["ts"] + s["dur"]) for s in kept]

    def in_kept(e):
        return any(lo <= e["ts"] < hi for lo, hi in windows)

    per_category = collections.Counter()
    kernels = collections.defaultdict(lambda: [0, 0.0])
    for e in spans:
        if e.get("cat") == "step" or not in_kept(e):
            continue
        per_category[e.get("cat", "?")] += e["dur"]
        if e.get("cat") == "gpu":
            k = kernels[e.get("name", "?")]
            k[0] += 1
            k[1] += e["dur"]
    return pid, kept, per_category, kernels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--skip-steps", type=int, default=1)
    args = parser.parse_args()
    pid, kept, per_category, kernels = load(args.trace, args.skip_steps)
    n = len(kept)
    print(f"rank {pid}: {n} steps, {sum(s['dur'] for s in kept) / n / 1e3:.3f}"
          " ms/step")
    for category, total in sorted(per_category.items(), key=lambda c: -c[1]):
        print(f"  {category:<14} {total / n / 1e3:10.3f} ms/step")
    if kernels:
        busy = sum(k[1] for k in kernels.values())
        print(f"GPU: {sum(k[0] for k in kernels.values()) / n:.0f} kernels "
              f"and GEMMs per step, busy {busy / n / 1e3:.3f} ms/step")
        kinds = collections.Counter()
        for name, (_, total) in kernels.items():
            kinds[kind_of(name)] += total
        print("  by kind: " + ", ".join(
            f"{kind} {total / n / 1e3:.3f}"
            for kind, total in sorted(kinds.items(), key=lambda k: -k[1]))
            + " ms/step")
        ranked = sorted(kernels.items(), key=lambda k: -k[1][1])
        for name, (count, total) in ranked[:args.top]:
            print(f"  {total / n / 1e3:9.3f} ms/step {100 * total / busy:5.1f}%"
                  f" {count / n:7.1f}x  {name}")


if __name__ == "__main__":
    main()

"""Checks the learning rate each step line of a loom-run log prints against
the schedule computed here, independently: a linear warm-up from 0 over
WARMUP steps to PEAK, then DECAY (constant, cosine or linear) to FINAL at
step END. Prints "N steps, lr as scheduled" or the first step that is not.

usage: check-lr.py LOG PEAK FINAL WARMUP DECAY END"""
import math
import re
import sys

log, peak, final, warmup, decay, end = sys.argv[1:7]
peak, final, warmup, end = float(peak), float(final), int(warmup), int(end)


def scheduled(step):
    if step <= warmup:
        return peak * step / warmup
    if decay == "constant":
        return peak
    progress = min(1.0, (step - warmup) / (end - warmup))
    kept = (0.5 * (1 + math.cos(math.pi * progress)) if decay == "cosine"
            else 1 - progress)
    return final + kept * (peak - final)


steps = 0
for line in open(log):
    m = re.match(r"step +(\d+)/\d+ \| .*\| lr ([0-9.e+-]+) \|", line)
    if not m:
        continue
    step, lr = int(m.group(1)), float(m.group(2))
    if abs(lr - scheduled(step)) > 1e-5 * abs(scheduled(step)) + 1e-12:
        sys.exit(f"step {step}: lr {lr}, scheduled {scheduled(step)}")
    steps += 1
print(f"{steps} steps, lr as scheduled")

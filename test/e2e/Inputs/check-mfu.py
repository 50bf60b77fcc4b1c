"""Recomputes the MFU (and HFU) of each step line loom-run printed with
--peak-tflops.

The model's FLOPs of a step are MosaicML's count (abi.h, docs/cost-model.md):
per token, 6 x parameters plus 4 x layers x width x sequence; the MFU is
those FLOPs a second over `ranks` devices of the given peak. The hardware's
add the forward pass the plan recomputes: attention's 2 x layers x width x
sequence under selective recomputation, and 2 x parameters too under full.
Usage:
check-mfu.py OUTPUT PEAK_TFLOPS RANKS LAYERS WIDTH [none|selective|full]
"""
import re
import sys

text = open(sys.argv[1]).read()
peak, ranks = float(sys.argv[2]) * 1e12, int(sys.argv[3])
layers, width = int(sys.argv[4]), int(sys.argv[5])
recompute = sys.argv[6] if len(sys.argv) > 6 else "none"
header = re.search(r"^loom-run: [^,]+, (\d+) parameters, (\d+) x (\d+) tokens", text, re.M)
if not header:
    sys.exit("no header line")
params, batch, seq = (int(g) for g in header.groups())
flops = batch * seq * (6 * params + 4 * layers * width * seq)
hardware = flops + batch * seq * (
    (2 * params if recompute == "full" else 0) +
    (2 * layers * width * seq if recompute != "none" else 0))
steps = re.findall(r"^step +\d+/\d+ \|.*\| +([0-9.]+) ms \|.*\| MFU ([0-9.]+)%(?: \(HFU ([0-9.]+)%\))?", text, re.M)
if not steps:
    sys.exit("no step line with an MFU")
for ms, printed, printed_hfu in steps:
    if bool(printed_hfu) != (recompute != "none"):
        sys.exit(f"step of {ms} ms: HFU '{printed_hfu}' under recompute={recompute}")
    for name, count, shown in (("MFU", flops, printed), ("HFU", hardware, printed_hfu)):
        if not shown:
            continue
        expected = count / (float(ms) * 1e-3) / (ranks * peak) * 100
        # The line rounds the time to 0.01 ms and the figure to 0.1%.
        if abs(expected - float(shown)) > 0.05 + expected * 0.01 / float(ms):
            sys.exit(f"step of {ms} ms: {name} {shown}%, expected {expected:.2f}%")
# The summary's mean is of the steps after the first (which allocates the
# step's buffers), where there are any.
summary = re.search(r"^loom-run: \d+ steps.*?, ([0-9.]+) ms/step", text, re.M)
timed = [float(step[0]) for step in steps][1:] or [float(steps[0][0])]
if summary and abs(float(summary.group(1)) - sum(timed) / len(timed)) > 0.01:
    sys.exit(f"summary of {summary.group(1)} ms/step, the steps after the "
             f"first take {sum(timed) / len(timed):.3f}")
print(f"{len(steps)} steps, MFU as counted: {flops:.6g} FLOPs a step"
      + (f", HFU: {hardware:.6g}" if recompute != "none" else ""))

"""Reads --emit=step IR from stdin and checks that the shapes follow the
plan: @forward takes batch / (dp * mb) sequences, @train_step batch / dp."""
import re
import sys

ir = sys.stdin.read()
plan = re.search(r"loom.plan = #loom.plan<dp = (\d+), tp = \d+, pp = \d+, zero = \d+, micro_batches = (\d+)", ir)
batch = int(re.search(r"loom.training = #loom.training<batch = (\d+)", ir).group(1))
dp, mb = int(plan.group(1)), int(plan.group(2))
rows = {m.group(1): int(m.group(2)) for m in re.finditer(
    r"func.func @(\w+)\([^)]*?tensor<(\d+)x\d+xi32> \{loom.input = \"tokens\"\}", ir)}
expected = {"forward": batch // (dp * mb), "train_step": batch // dp}
for name, want in expected.items():
    if rows.get(name) != want:
        sys.exit(f"@{name} takes {rows.get(name)} sequences, expected {want} (batch {batch}, dp {dp}, mb {mb})")
print(f"batch {batch} = dp {dp} x mb {mb} x {expected['forward']} sequences")

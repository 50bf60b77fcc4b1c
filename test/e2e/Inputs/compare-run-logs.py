"""Fails unless every training step that the JSON log RESUMED (loom-run
--log) records is in FULL's with a loss within a relative TOLERANCE, and
both end at the same step: a run killed and resumed, under any plan,
trains as the uninterrupted one. Records of a step written twice (a run
resumed from a checkpoint older than its last steps) count by the later.

    compare-run-logs.py FULL RESUMED TOLERANCE"""
import json
import sys


def losses(path):
    steps = {}
    with open(path) as log:
        for number, line in enumerate(log, 1):
            try:
                record = json.loads(line)
            except ValueError:
                sys.exit(f"{path}:{number}: not JSON: {line!r}")
            if record["type"] == "step":
                steps[record["step"]] = record["loss"]
    if not steps:
        sys.exit(f"{path}: no step records")
    return steps


full, resumed = losses(sys.argv[1]), losses(sys.argv[2])
tolerance = float(sys.argv[3])
if max(full) != max(resumed):
    sys.exit(f"the full run ends at step {max(full)}, the resumed one at {max(resumed)}")
missing = sorted(set(resumed) - set(full))
if missing:
    sys.exit(f"steps {missing} are not in {sys.argv[1]}")
worst = max(abs(full[s] - resumed[s]) / abs(full[s]) for s in resumed)
print(f"{len(resumed)} steps from {min(resumed)} to {max(resumed)}, "
      f"largest relative difference of the losses {worst:.2e}")
sys.exit(0 if worst <= tolerance else 1)

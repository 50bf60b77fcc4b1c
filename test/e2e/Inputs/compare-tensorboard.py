"""Reads a --tensorboard directory with TensorBoard's own event reader and
checks every scalar against the --log file's step records.

    compare-tensorboard.py DIR LOG
"""
import json
import math
import sys

from tensorboard.backend.event_processing import event_accumulator


def main():
    directory, log = sys.argv[1], sys.argv[2]
    events = event_accumulator.EventAccumulator(
        directory, size_guidance={event_accumulator.SCALARS: 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    steps = [r for r in map(json.loads, open(log)) if r["type"] == "step"]
    compared = 0
    for record in steps:
        for key, value in record.items():
            if key in ("type", "step") or not isinstance(value, (int, float)) \
                    or isinstance(value, bool):
                continue
            if key not in tags:
                sys.exit(f"no scalar {key!r} in {directory} (has {tags})")
            at = {e.step: e.value for e in events.Scalars(key)}
            if record["step"] not in at:
                sys.exit(f"{key}: no value at step {record['step']}")
            if not math.isclose(at[record["step"]], value, rel_tol=1e-6,
                                abs_tol=1e-30):
                sys.exit(f"{key} at step {record['step']}: "
                         f"{at[record['step']]} against the log's {value}")
            compared += 1
    print(f"{len(steps)} steps, {compared} scalars equal; tags:",
          " ".join(sorted(tags)))


main()

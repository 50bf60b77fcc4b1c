"""Fails unless FILE is a Chrome trace-event file of a pipeline run whose
ranks ran the schedule's order in every step, each pass after what it
consumes: a pipeline rank's forward pass of a micro-batch after the
previous rank's, its backward pass after the next rank's.

    check-trace.py FILE PP MICRO_BATCHES gpipe|1f1b

Prints the spans it found and the first ranks' order in the first step."""
import json
import sys

path, pp, m, schedule = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
trace = json.load(open(path))
events = trace["traceEvents"]
for e in events:
    if e["ph"] == "X" and not all(k in e for k in ("name", "cat", "pid", "ts", "dur")):
        sys.exit(f"an event without a name, category, rank or time: {e}")
names = {e["pid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "process_name"}
if sorted(names) != list(range(pp)):
    sys.exit(f"tracks of ranks {sorted(names)}, expected 0 to {pp - 1}")


def expected(r):
    """Rank r's passes, as ("F" | "B", micro-batch)."""
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(pp - r - 1, m)
    order = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while b < m:
        if f < m:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
        b += 1
    return order


# Per rank, per step: the passes in time order, with their spans.
passes = {}
for r in range(pp):
    steps = sorted((e for e in events if e["pid"] == r and e.get("cat") == "step"),
                   key=lambda e: e["ts"])
    spans = sorted((e for e in events if e["pid"] == r and e.get("cat") in ("forward", "backward")),
                   key=lambda e: e["ts"])
    if not steps:
        sys.exit(f"rank {r}: no steps")
    for s, step in enumerate(steps):
        inside = [e for e in spans if step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"]]
        got = [(e["name"][0], e["args"]["micro_batch"]) for e in inside]
        if got != expected(r):
            sys.exit(f"rank {r}, step {s + 1}: order {got}, expected {expected(r)}")
        for a, b in zip(inside, inside[1:]):
            if a["ts"] + a["dur"] > b["ts"]:
                sys.exit(f"rank {r}: {a['name']} and {b['name']} overlap")
        for e in inside:
            passes[(s, r, e["name"][0], e["args"]["micro_batch"])] = e
steps = len({s for (s, _, _, _) in passes})
# The staircase: what each pass consumes ended before it began.
for (s, r, kind, i), e in passes.items():
    before = passes.get((s, r - 1, "F", i)) if kind == "F" else passes.get((s, r + 1, "B", i))
    if before is not None and before["ts"] + before["dur"] > e["ts"]:
        sys.exit(f"step {s + 1}: rank {r}'s {e['name']} began before rank "
                 f"{r - 1 if kind == 'F' else r + 1}'s {before['name']} ended")
comm = sum(1 for e in events if e.get("cat") == "communication")
optimizer = sum(1 for e in events if e.get("cat") == "optimizer")
print(f"{pp} ranks, {steps} steps, {len(passes)} forward and backward passes "
      f"in {schedule} order, {comm} communication spans, {optimizer} optimizer spans")
for r in range(min(pp, 2)):
    print(f"rank {r}: " + " ".join(f"{k}{i}" for k, i in expected(r)))

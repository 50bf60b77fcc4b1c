"""Checks a compiled step's arena against what loom-run measured.

usage: check-arena.py MEMORY RUNLOG RANKS [PLAN] [--stage-ranks N]

MEMORY is `loomc --emit=memory`'s output for the plan, RUNLOG loom-run's
output with --verbose-ranks under RANKS ranks (plain output for one). For
each rank, the arena loomc printed for the rank's training step
(train_step, or train_step_stage<r> of a pipeline), the arena loom-run read
from the artifact, and the most bytes the step allocated at once as
loom-run measured them must be one number; and the rank's peak loomc
printed (parameters, optimizer state and arena) must be the most bytes of
tensors loom-run held at once, less the runtime's five scalars (learning
rate, step, loss scale, loss and gradient norm, 4 bytes each). With PLAN,
`loomc --emit=plan --cost-framework=loom`'s report of the same plan, the
tensors the planner counts for each rank's stage must be within 2% of what
loom-run held. A pipeline's stage has N ranks (--stage-ranks, dp x tp;
default 1), rank r running stage r // N. Prints one line per rank; exits 1
on a mismatch or a missing figure.
"""

import re
import sys

RUNTIME_SCALARS = 5 * 4


def main():
    args = sys.argv[1:]
    stage_ranks = 1
    if "--stage-ranks" in args:
        at = args.index("--stage-ranks")
        stage_ranks = int(args[at + 1])
        del args[at:at + 2]
    sys.argv[1:] = args
    memory, run = open(sys.argv[1]).read(), open(sys.argv[2]).read()
    ranks = int(sys.argv[3])
    planned = None
    if len(sys.argv) > 4:
        planned = {
            int(r): int(size)
            for r, size in re.findall(
                r"compiled stage (\d+): tensors (\d+) B", open(sys.argv[4]).read()
            )
        }
    compiled = {
        entry: int(size)
        for entry, size in re.findall(r"compiled\s+(\S+): arena (\d+) B", memory)
    }
    prefix = r"\[rank (\d+)\] " if ranks > 1 else r"()"
    announced = {
        int(r or 0): int(size)
        for r, size in re.findall(
            prefix + r"loom-run: the step's buffers: an arena of (\d+) B", run
        )
    }
    peaks = {
        entry: int(size)
        for entry, size in re.findall(
            r"compiled\s+(\S+): the rank's peak (\d+) B", memory
        )
    }
    tensors = {
        int(r or 0): int(size)
        for r, size in re.findall(prefix + r"loom-run: .*\(tensors (\d+) B", run)
    }
    measured = {
        int(r or 0): int(size)
        for r, size in re.findall(
            prefix + r"loom-run: .*the step's buffers (\d+) B\)", run
        )
    }
    pipeline = any(entry.startswith("train_step_stage") for entry in compiled)
    failed = False
    for rank in range(ranks):
        stage = rank // stage_ranks if pipeline else 0
        entry = f"train_step_stage{stage}" if pipeline else "train_step"
        figures = (compiled.get(entry), announced.get(rank), measured.get(rank))
        if None in figures or len(set(figures)) != 1:
            print(
                f"rank {rank}: {entry}: compiled {figures[0]}, "
                f"artifact {figures[1]}, measured {figures[2]}: differ"
            )
            failed = True
            continue
        peak, held = peaks.get(entry), tensors.get(rank)
        if peak is None or held is None or held - RUNTIME_SCALARS != peak:
            print(
                f"rank {rank}: {entry}: compiled peak {peak}, measured "
                f"tensors {held} less {RUNTIME_SCALARS} B of scalars: differ"
            )
            failed = True
            continue
        if planned is not None:
            # Without a pipeline every rank runs stage 0's step.
            plan = planned.get(stage)
            if plan is None or abs(plan - held) > 0.02 * held:
                print(
                    f"rank {rank}: {entry}: planner {plan}, measured tensors "
                    f"{held}: more than 2% apart"
                )
                failed = True
                continue
            print(
                f"rank {rank}: {entry}: arena {figures[0]} B, peak {peak} B, "
                f"measured equal; planner {plan} B, "
                f"{100 * abs(plan - held) / held:.4f}% off"
            )
            continue
        print(
            f"rank {rank}: {entry}: arena {figures[0]} B, peak {peak} B, "
            "measured equal"
        )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

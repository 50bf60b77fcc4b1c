"""Fails unless the arena of the training step in the memory report A
(loomc --emit=memory) exceeds B's by at least BYTES.

    arena-saving.py A.txt B.txt BYTES"""
import re
import sys


def arena(path):
    found = re.search(r"^compiled +train_step: arena (\d+) B", open(path).read(), re.M)
    if not found:
        sys.exit(f"{path}: no arena of train_step")
    return int(found.group(1))


saving = arena(sys.argv[1]) - arena(sys.argv[2])
if saving < int(sys.argv[3]):
    sys.exit(f"the arena of train_step is {saving} B smaller, not {sys.argv[3]} B")
print(f"the arena of train_step is {saving} B smaller")

"""Fails unless two llm.c checkpoints have the same header and parameters
that agree to a relative tolerance: max |a - b| <= tol * max |a|. (Per
element, AdamW turns the rounding of a near-zero gradient into a step of
about the learning rate, so small parameters are compared on the scale of
the model's.)"""
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    header = struct.unpack("256i", data[:1024])
    count = (len(data) - 1024) // 4
    return header, struct.unpack(f"{count}f", data[1024:1024 + 4 * count])


(ha, a), (hb, b), tolerance = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
if ha != hb or len(a) != len(b) or not a:
    sys.exit("the checkpoints' headers or sizes differ")
worst = max(abs(x - y) for x, y in zip(a, b)) / max(abs(x) for x in a)
print(f"{len(a)} parameters, largest difference relative to the largest "
      f"parameter {worst:.2e}")
sys.exit(0 if worst <= tolerance else 1)

"""Fails unless two llm.c checkpoints have the same header and parameters
that agree to a relative tolerance: for each of the checkpoint's tensors,
the root mean square of a - b is at most tol * max |a|.

Small parameters are compared on the scale of the model's, and each tensor
as a whole: AdamW turns the rounding of a gradient near its epsilon into a
step of up to the learning rate, whatever the size of the rounding, so a
single element may differ by a large share of the learning rate between two
orders of summation (another plan, or another CPU's BLAS kernels and vector
width), while a tensor whose gradient is wrong differs in most of its
elements. The largest single difference is printed too."""
import math
import struct
import sys

# llm.c's tensors in file order, by their shapes' products.
def tensor_sizes(header):
    max_t, _, layers, _, c, padded_v = header[2:8]
    return [
        ("wte", padded_v * c), ("wpe", max_t * c),
        ("ln1w", layers * c), ("ln1b", layers * c),
        ("qkvw", layers * 3 * c * c), ("qkvb", layers * 3 * c),
        ("attprojw", layers * c * c), ("attprojb", layers * c),
        ("ln2w", layers * c), ("ln2b", layers * c),
        ("fcw", layers * 4 * c * c), ("fcb", layers * 4 * c),
        ("fcprojw", layers * 4 * c * c), ("fcprojb", layers * c),
        ("lnfw", c), ("lnfb", c),
    ]


def read(path):
    data = open(path, "rb").read()
    header = struct.unpack("256i", data[:1024])
    count = (len(data) - 1024) // 4
    return header, struct.unpack(f"{count}f", data[1024:1024 + 4 * count])


(ha, a), (hb, b), tolerance = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
sizes = tensor_sizes(ha)
if ha != hb or len(a) != len(b) or not a or sum(n for _, n in sizes) != len(a):
    sys.exit("the checkpoints' headers or sizes differ, or do not describe "
             "their data")
scale = max(abs(x) for x in a)
worst, worst_name, start = 0.0, "", 0
for name, n in sizes:
    rms = math.sqrt(sum((x - y) ** 2 for x, y in
                        zip(a[start:start + n], b[start:start + n])) / n)
    if rms >= worst:
        worst, worst_name = rms, name
    start += n
single = max(abs(x - y) for x, y in zip(a, b))
print(f"{len(a)} parameters, largest root mean square difference of a tensor "
      f"relative to the largest parameter {worst / scale:.2e} ({worst_name}); "
      f"largest single difference {single / scale:.2e}")
sys.exit(0 if worst <= tolerance * scale else 1)

"""Copies an artifact, replacing text in its manifest and writing the
checksum the edited file has (docs/artifact.md), so that the runtime's checks
of the manifest itself are what a test reaches.
  edit-manifest.py IN OUT OLD NEW   (OLD, NEW: Python string literals)
NEW may be shorter than OLD (the manifest is padded with NULs), not longer."""
import ast
import re
import sys

FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv1a(data):
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


data = bytearray(open(sys.argv[1], "rb").read())
old, new = (ast.literal_eval(a).encode() for a in sys.argv[3:5])
start = data.index(b"loom-artifact ")
end = data.index(b"\0", start)
text = bytes(data[start:end])
assert old in text, "pattern not in the manifest"
edited = text.replace(old, new, 1)
assert len(edited) <= len(text), "the edited manifest is longer"
data[start:end] = edited + b"\0" * (len(text) - len(edited))
digits = re.search(rb"\nchecksum ([0-9a-f]{16})\n", data[start:end])
if digits:
    at = start + digits.start(1)
    data[at:at + 16] = b"0" * 16
    data[at:at + 16] = b"%016x" % fnv1a(data)
open(sys.argv[2], "wb").write(data)

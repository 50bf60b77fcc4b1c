"""Copies a file, replacing the first occurrence of one byte string by
another of the same length: forges artifacts and checkpoints for the
bad-input tests.  patch-bytes.py IN OUT OLD NEW   (OLD/NEW: Python literals)"""
import ast
import sys

data = open(sys.argv[1], "rb").read()
old, new = ast.literal_eval(sys.argv[3]), ast.literal_eval(sys.argv[4])
assert len(old) == len(new) and old in data, "pattern not found"
open(sys.argv[2], "wb").write(data.replace(old, new, 1))

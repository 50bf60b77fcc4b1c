"""Checks that every path a document names is in the tree.

usage: doc-paths.py ROOT DOC...   (a directory DOC: each of its *.md)
A path is a word with a slash that starts at one of the source tree's
top-level directories (lib/, test/, runtime/, ...); build outputs and other
git-ignored directories (build/) are not the tree, so paths into them are
not checked. A path with <...> in it stands for many (lib/<Library>/) and is
skipped, as are globs. Prints "<doc>: N paths, all present", or each missing
path and exits 1.
"""

import os
import re
import subprocess
import sys

root, docs = sys.argv[1], []
for arg in sys.argv[2:]:
    if os.path.isdir(arg):
        docs += sorted(os.path.join(arg, name) for name in os.listdir(arg)
                       if name.endswith(".md"))
    else:
        docs.append(arg)
# Tracked and untracked-but-not-ignored files name the source tree's
# directories; a directory holding only ignored files (build/) is not one.
files = subprocess.run(
    ["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
    check=True, capture_output=True, text=True).stdout.split()
tops = {name.split("/")[0] + "/" for name in files
        if "/" in name and not name.startswith(".")}
missing = 0
for doc in docs:
    text = open(doc).read()
    paths = set()
    for word in re.findall(r"[A-Za-z0-9_.\-/<>*]+", text):
        word = word.rstrip(".,")
        if "/" not in word or "<" in word or "*" in word:
            continue
        if not any(word.startswith(top) for top in tops):
            continue
        paths.add(word)
    absent = sorted(p for p in paths if not os.path.exists(os.path.join(root, p)))
    for p in absent:
        print(f"{os.path.basename(doc)}: no {p}")
    missing += len(absent)
    if not absent:
        print(f"{os.path.basename(doc)}: {len(paths)} paths, all present")
sys.exit(1 if missing else 0)

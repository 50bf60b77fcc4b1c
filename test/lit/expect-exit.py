#!/usr/bin/env python3
"""Runs a command and succeeds only if it exits with the given status.

`not` accepts any failure; Loom's tools promise exit status 1 for bad input
(never a crash or another code), and the tests hold them to it.

Usage: expect-exit.py STATUS COMMAND [ARGS...]
"""
import subprocess
import sys

expected = int(sys.argv[1])
status = subprocess.call(sys.argv[2:])
if status != expected:
    sys.stderr.write(f"expect-exit: '{' '.join(sys.argv[2:])}' exited with "
                     f"{status}, expected {expected}\n")
    sys.exit(1)

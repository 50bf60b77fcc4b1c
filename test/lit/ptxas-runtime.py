"""Assembles the runtime's own kernel modules (PTX files) with ptxas.

usage: ptxas-runtime.py PTXAS ARCH FILE...
Prints "<n> runtime kernel modules assemble for <arch>", then a line per
kernel: "<name> <r> registers, <s> bytes static shared memory, <b> bytes
spilled"; exits 1 at the first module ptxas rejects, or whose kernel
declares more than the 48 KiB of static shared memory a launch may use.
"""

import os
import re
import subprocess
import sys
import tempfile

ptxas, arch, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
if not paths:
    sys.exit("no PTX files")
kernels = []
with tempfile.TemporaryDirectory() as tmp:
    for path in paths:
        result = subprocess.run(
            [ptxas, "-v", "-arch=" + arch, path, "-o", os.path.join(tmp, "out.cubin")],
            capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit("%s: ptxas failed:\n%s" % (path, result.stderr))
        for smem in re.findall(r"(\d+) bytes smem", result.stderr):
            if int(smem) > 48 * 1024:
                sys.exit("%s: a kernel declares %s bytes of shared memory" % (path, smem))
        # ptxas reports each kernel's properties after naming it.
        for name, body in re.findall(
                r"Compiling entry function '(\w+)'.*?\n(.*?)(?=ptxas info\s+: Compiling|\Z)",
                result.stderr, re.S):
            registers = re.search(r"Used (\d+) registers", body)
            smem = re.search(r"(\d+) bytes smem", body)
            spills = re.search(r"(\d+) bytes spill stores", body)
            kernels.append("%s %s registers, %s bytes static shared memory, %s bytes spilled" % (
                name, registers.group(1) if registers else "?",
                smem.group(1) if smem else "0", spills.group(1) if spills else "0"))
print("%d runtime kernel modules assemble for %s" % (len(paths), arch))
for line in kernels:
    print(line)

"""Assembles each kernel module of `loomc --emit=ptx` output with ptxas.

usage: ptxas-all.py PTXAS ARCH FILE
Prints "<n> kernel modules assemble for <arch>"; exits 1 at the first
module ptxas rejects, after printing ptxas's message.
"""

import os
import subprocess
import sys
import tempfile

ptxas, arch, path = sys.argv[1:4]
marker = "// loom-kernel-module "
modules = []
with open(path) as f:
    for line in f:
        if line.startswith(marker):
            modules.append([line[len(marker):].strip(), []])
        elif modules:
            modules[-1][1].append(line)
if not modules:
    sys.exit("no kernel modules in " + path)
with tempfile.TemporaryDirectory() as tmp:
    for name, lines in modules:
        source = os.path.join(tmp, name + ".ptx")
        with open(source, "w") as f:
            f.writelines(lines)
        result = subprocess.run(
            [ptxas, "-arch=" + arch, source, "-o", os.path.join(tmp, name + ".cubin")],
            capture_output=True, text=True)
        if result.returncode != 0:
            sys.stdout.write(result.stdout + result.stderr)
            sys.exit("ptxas rejects kernel module " + name)
print("%d kernel modules assemble for %s" % (len(modules), arch))

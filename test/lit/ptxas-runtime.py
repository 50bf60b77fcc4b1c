"""Assembles the runtime's own kernel modules (PTX files) with ptxas.

usage: ptxas-runtime.py PTXAS ARCH FILE...
Prints "<n> runtime kernel modules assemble for <arch>"; exits 1 at the
first module ptxas rejects, or whose kernel declares more than the 48 KiB
of shared memory a launch without an opt-in may use.
"""

import os
import re
import subprocess
import sys
import tempfile

ptxas, arch, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
if not paths:
    sys.exit("no PTX files")
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
print("%d runtime kernel modules assemble for %s" % (len(paths), arch))

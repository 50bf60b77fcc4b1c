"""Checks that loom-run's GEMMs line names kernels for the widest vector
units /proc/cpuinfo lists: OpenBLAS's kernel set, and oneDNN's units where
oneDNN runs the GEMMs (OpenBLAS then takes the small ones).

    check-blas-kernels.py LOG
"""
import re
import sys

# OpenBLAS's kernel sets by the vector units they use.
WIDTHS = {
    "skylakex": "avx512", "cooperlake": "avx512", "sapphirerapids": "avx512",
    "haswell": "avx2", "zen": "avx2", "excavator": "avx2",
    "sandybridge": "avx", "bulldozer": "avx", "piledriver": "avx",
    "steamroller": "avx",
    # oneDNN's, as the runtime names them.
    "avx-512": "avx512", "avx2": "avx2", "avx": "avx",
}


def widest(flags):
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "avx512"
    if {"avx2", "fma"} <= flags:
        return "avx2"
    return "avx" if "avx" in flags else "sse"


def main():
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next(set(line.split(":", 1)[1].split()) for line in cpuinfo
                     if line.startswith("flags"))
    with open(sys.argv[1]) as log:
        line = next((line for line in log if "GEMMs: " in line), "")
    named = re.findall(r"GEMMs: (OpenBLAS|oneDNN) \S+, ([\w-]+) kernels", line)
    if not named:
        sys.exit("no GEMMs line in " + sys.argv[1])
    if named[0][0] == "oneDNN" and [n[0] for n in named] != ["oneDNN",
                                                            "OpenBLAS"]:
        sys.exit("oneDNN's GEMMs line names no OpenBLAS for the small ones")
    expected = widest(flags)
    for library, kernels in named:
        got = WIDTHS.get(kernels.lower(), "sse")
        if got != expected:
            sys.exit(f"{library}'s {kernels} kernels use {got}; "
                     f"this CPU has {expected}")
    print(f"kernels match the CPU: {expected}")


main()

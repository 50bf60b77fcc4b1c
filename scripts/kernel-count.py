#!/usr/bin/env python3
"""Kernel launches and runtime calls of one training step, from the IR.

Reads the CUDA step as loom-wait-for-device leaves it, where the host's loops
are still scf.for loops with constant bounds:

  loom-opt model.mlir --loom-pipeline="emit=llvm target=cuda" \\
      --mlir-print-ir-after=loom-wait-for-device -o /dev/null 2> step.mlir
  scripts/kernel-count.py step.mlir [--function train_step]

and counts what one call of the function launches, each launch inside a host
loop (a layer loop) once per iteration. A launch may run several loop nests,
each on blocks of its own (loom-parallel-loops-to-gpu); the nests are sorted
by what their body does: `fill` (stores, no loads), `copy` (loads stored as
they are), `widen` and `round` (one conversion), `reduction` (a warp's
shuffles), and `other`. The runtime's calls (GEMMs, attention, waits for the
device) are counted by name. With --bytes, each kind also gets the bytes its
nests move: each buffer a nest loads from counted once, whole, and each it
stores to likewise (a static floor of the memory traffic, without the
runtime's calls; a gather counts its whole table). With --by-kernel, each
kernel (a launch's function, as `loom-run --trace` names its spans) gets
its launches and bytes a step, the most first (a kernel that gathers,
loading at an index it loaded, is marked: its table is counted whole);
with --trace RUN.json too, its time a step in that trace
(scripts/trace-summary.py's steps) and the bandwidth the bytes give, the
slowest first. Exit 1 with the reason where
the function is not there.
"""

import argparse
import collections
import importlib.util
import os
import re
import sys

CONSTANT = re.compile(r"^\s*(%[\w.]+) = arith\.constant (-?\d+) : index")
FOR = re.compile(r"\bscf\.for %[\w.]+ = (%[\w.]+) to (%[\w.]+) step (%[\w.]+)")
CALL = re.compile(r"\bcall @(loom_rt_\w+)\(")
BLOCK = re.compile(r"gpu\.launch blocks\((%[\w.]+),")
FUNCTION = re.compile(r"\bfunction\(@([\w.]+)\)")
CONVERSIONS = ("arith.extf", "arith.truncf")
ACCESS = re.compile(r"\bmemref\.(load|store) (?:%[\w.]+, )?(%[\w.]+)\[.*\] : "
                    r"memref<((?:\d+x)*)(\w+)")
ELEMENT_BYTES = {"f64": 8, "i64": 8, "index": 8, "f32": 4, "i32": 4,
                 "bf16": 2, "f16": 2, "i16": 2, "i8": 1, "i1": 1}
DEFINED = re.compile(r"^\s*(%[\w.]+)(?::\d+)? = (.*)$")
VALUE = re.compile(r"%[\w.]+")
INDICES = re.compile(r"\bmemref\.load %[\w.]+\[([^\]]*)\]")


def traffic(body):
    """The bytes a nest moves: each buffer it loads from, and each it stores
    to, once and whole."""
    seen = {}
    for line in body:
        match = ACCESS.search(line)
        if not match:
            continue
        access, name, dims, element = match.groups()
        size = ELEMENT_BYTES.get(element, 4)
        for dim in dims.split("x")[:-1]:
            size *= int(dim)
        seen[(access, name)] = size
    return sum(seen.values())


def gathers(body):
    """Whether a nest loads at an index computed from a value it loaded (a
    row of a table picked by a token, say), whose table --bytes counts
    whole."""
    loaded = set()  # values loaded, and those computed from them
    for line in body:
        match = DEFINED.match(line)
        if not match:
            continue
        value, rest = match.groups()
        if rest.startswith("memref.load "):
            indices = INDICES.search(line)
            if indices and set(VALUE.findall(indices.group(1))) & loaded:
                return True
            loaded.add(value)
        elif set(VALUE.findall(rest)) & loaded:
            loaded.add(value)
    return False


def kind(body):
    """What a launch's body does, from its text."""
    text = "\n".join(body)
    if "memref.load" not in text:
        return "fill"
    if "gpu.shuffle" in text:
        return "reduction"
    ops = set(re.findall(r"\b(?:arith|math)\.\w+", text))
    # Index arithmetic, comparisons and constants do not compute values.
    ops -= {"arith.constant", "arith.addi", "arith.subi", "arith.muli",
            "arith.remsi", "arith.divsi", "arith.cmpi", "arith.index_cast"}
    if not ops:
        return "copy"
    if ops == {"arith.extf"}:
        return "widen"
    if ops == {"arith.truncf"}:
        return "round"
    return "other"


def nests(body):
    """The bodies of the loop nests a launch runs: where it runs several, a
    block compares its number with where each nest's blocks end and branches
    to the nest's code (`scf.if`), the next nests in the `else` branch."""
    block = BLOCK.search(body[0]).group(1)
    compare = re.compile(r"= arith\.cmpi slt, %s, " % re.escape(block))
    found = []
    rest = body[1:]
    while True:
        at = next((i for i, line in enumerate(rest) if compare.search(line)),
                  None)
        if at is None:
            found.append(rest)
            return found
        # The branch's body: to its `} else {`.
        begin = next(i for i in range(at, len(rest)) if "scf.if" in rest[i])
        end, depth = begin, 0
        while True:
            depth += rest[end].count("{") - rest[end].count("}")
            if depth == 1 and rest[end].strip() == "} else {":
                break
            end += 1
        found.append(rest[begin + 1:end])
        rest = rest[end + 1:]


def count(lines, function):
    start = next((i for i, line in enumerate(lines)
                  if re.search(r"\bfunc\.func (?:private )?@%s\(" % function,
                               line)), None)
    if start is None:
        return None
    constants = {}
    launches = 0
    kinds = collections.Counter()
    moved = collections.Counter()
    calls = collections.Counter()
    # Each kernel's launches, bytes and whether it gathers.
    kernels = collections.defaultdict(lambda: [0, 0, False])
    # (brace depth where the loop's body ends, multiplier outside it)
    loops = []
    depth, times = 0, 1
    i = start + 1
    while i < len(lines):
        line = lines[i]
        if depth == 0 and line.strip() == "}":
            break
        match = CONSTANT.match(line)
        if match:
            constants[match.group(1)] = int(match.group(2))
        if "gpu.launch blocks" in line:
            # The body, whose loops run in each thread, not on the host.
            begin, nesting = i, 0
            while True:
                nesting += lines[i].count("{") - lines[i].count("}")
                i += 1
                if nesting <= 0:
                    break
            launches += times
            function = FUNCTION.search(lines[begin])
            kernel = kernels[function.group(1) if function else "?"]
            kernel[0] += times
            for nest in nests(lines[begin:i]):
                kinds[kind(nest)] += times
                moved[kind(nest)] += times * traffic(nest)
                kernel[1] += times * traffic(nest)
                kernel[2] = kernel[2] or gathers(nest)
            continue
        for name in CALL.findall(line):
            calls[name] += times
        opened = line.count("{") - line.count("}")
        match = FOR.search(line)
        if match and opened > 0:
            bounds = [constants.get(v) for v in match.groups()]
            trips = (max(0, -(-(bounds[1] - bounds[0]) // bounds[2]))
                     if None not in bounds else 1)
            loops.append((depth, times))
            times *= trips
        depth += opened
        while loops and depth <= loops[-1][0]:
            times = loops.pop()[1]
        i += 1
    return launches, kinds, calls, moved, kernels


def trace_times(path):
    """Each GPU span's name's milliseconds a step in a `loom-run --trace`
    file, read as scripts/trace-summary.py reads it."""
    spec = importlib.util.spec_from_file_location(
        "trace_summary", os.path.join(os.path.dirname(__file__),
                                      "trace-summary.py"))
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    _, steps, _, kernels = summary.load(path, 1)
    return {name: total / len(steps) / 1e3
            for name, (_, total) in kernels.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ir", help="the IR after loom-wait-for-device")
    parser.add_argument("--function", default="train_step",
                        help="the step's function (default train_step)")
    parser.add_argument("--bytes", action="store_true",
                        help="the bytes each kind of nest moves, and all")
    parser.add_argument("--by-kernel", action="store_true",
                        help="each kernel's launches and bytes")
    parser.add_argument("--trace", metavar="RUN.json",
                        help="with --by-kernel: each kernel's time in this "
                        "loom-run trace and its bandwidth")
    args = parser.parse_args()
    if args.trace and not args.by_kernel:
        parser.error("--trace goes with --by-kernel")
    try:
        with open(args.ir) as f:
            lines = f.read().split("\n")
    except OSError as error:
        sys.exit(f"kernel-count.py: {args.ir}: {error.strerror}")
    counted = count(lines, args.function)
    if counted is None:
        sys.exit(f"kernel-count.py: {args.ir}: no function @{args.function}")
    launches, kinds, calls, moved, kernels = counted
    print(f"@{args.function}: {launches} kernel launches per step, "
          f"{sum(kinds.values())} loop nests" +
          (f", {sum(moved.values()):,} B moved" if args.bytes else ""))
    for name, n in sorted(kinds.items(), key=lambda item: (-item[1],
                                                            item[0])):
        print(f"  {n:6d} {name}" +
              (f", {moved[name]:,} B" if args.bytes else ""))
    for name, n in sorted(calls.items()):
        print(f"  {n:6d} call {name}")
    if args.by_kernel:
        print_kernels(kernels, trace_times(args.trace) if args.trace else None)


def print_kernels(kernels, times):
    """One line a kernel: its launches and bytes a step, and with `times`
    (milliseconds a step by name) its time and GB/s, the slowest first; a
    kernel that gathers is marked, its table counted whole."""
    def mark(gather):
        return " (gathers: a table counted whole)" if gather else ""
    if times is None:
        print("kernels: launches, bytes a step")
        for name, (n, moved, gather) in sorted(
                kernels.items(), key=lambda k: (-k[1][1], k[0])):
            print(f"  {n:6d} {moved:16,} B  {name}{mark(gather)}")
        return
    print("kernels: launches, bytes a step, ms a step in the trace, GB/s")
    for name, (n, moved, gather) in sorted(
            kernels.items(), key=lambda k: (-times.get(k[0], 0), k[0])):
        ms = times.get(name)
        print(f"  {n:6d} {moved:16,} B " +
              (f"{ms:9.3f} ms {moved / ms / 1e6:8.1f} GB/s" if ms
               else f"{ms:9.3f} ms {'':>13}" if ms is not None
               else f"{'not in the trace':>28}") + f"  {name}{mark(gather)}")


if __name__ == "__main__":
    main()

"""Prints a model description with a cluster section of GPUS GPUs.

usage: with-cluster.py DESCRIPTION GPUS

Planning (loomc --emit=plan) needs a cluster; the examples have none. The
GPU kind does not change a plan's memory as Loom compiles it.
"""

import json
import sys


def main():
    description = json.load(open(sys.argv[1]))
    description["cluster"] = {
        "gpu": "A100-80GB",
        "gpus_per_node": int(sys.argv[2]),
        "nodes": 1,
    }
    print(json.dumps(description, indent=1))


if __name__ == "__main__":
    main()

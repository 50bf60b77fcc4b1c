"""Starts COMMAND (a loom-run, or an mpirun of several), sends SIGNAL to
PIDS once rank 0 has printed training step AFTER, and echoes the job's
output followed by "exit N". PIDS is "job" (the command's own process, as
mpirun forwards it) or "ranks" (each loom-run process of the job, as a
cluster's scheduler would).

Usage: interrupt.py SIGNAL AFTER PIDS COMMAND [ARGS...]"""
import os
import signal
import subprocess
import sys

sig = getattr(signal, sys.argv[1])
after, pids, command = int(sys.argv[2]), sys.argv[3], sys.argv[4:]
job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def descendants(root):
    """loom-run processes below `root`."""
    children = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(pid))
        except OSError:
            pass
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                if open(f"/proc/{child}/comm").read().strip() == "loom-run":
                    found.append(child)
            except OSError:
                pass
    return found


sent = False
for line in job.stdout:
    sys.stdout.write(line)
    if not sent and line.startswith(f"step {after:5d}/"):
        targets = [job.pid] if pids == "job" else descendants(job.pid)
        for pid in targets or [job.pid]:
            os.kill(pid, sig)
        sent = True
print(f"exit {job.wait()}")

"""Starts COMMAND (an mpirun of loom-run), kills the rank RANK with SIGKILL
once rank 0 has printed a training step, and checks that the whole job ends
with a non-zero status within LIMIT seconds.

Usage: kill-one-rank.py RANK LIMIT COMMAND [ARGS...]"""
import os
import signal
import subprocess
import sys
import time

rank, limit, command = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def parent(pid):
    """The parent of process `pid`, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command may hold spaces and parentheses: fields follow the
            # last ')'.
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descends_from_job(pid):
    """Whether `pid` was started by this job's mpirun, not by another job
    that runs at the same time (tests run side by side)."""
    while pid and pid > 1:
        if pid == job.pid:
            return True
        pid = parent(pid)
    return False


def rank_process():
    """The pid of a process of this job (a descendant of mpirun) whose
    environment says it is the rank to kill."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                name = f.read().split(b"\0")[0]
        except OSError:
            continue
        if (name.endswith(b"loom-run")
                and b"OMPI_COMM_WORLD_RANK=" + rank.encode() in env
                and descends_from_job(int(pid))):
            return int(pid)
    return None


for line in job.stdout:
    if line.startswith("step "):
        break
else:
    sys.exit("the job ended before its first step")
victim = rank_process()
if victim is None:
    job.kill()
    sys.exit(f"no process of rank {rank} found")
os.kill(victim, signal.SIGKILL)
start = time.monotonic()
try:
    job.communicate(timeout=limit)
    status = job.returncode
except subprocess.TimeoutExpired:
    job.kill()
    sys.exit(f"the job still ran {limit:.0f} s after rank {rank} was killed")
print(f"killed rank {rank}: the job ended with status {status} "
      f"after {time.monotonic() - start:.1f} s")
sys.exit(0 if status != 0 else 1)

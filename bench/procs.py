"""CPU time of a process and its direct children (gunicorn's workers, PostgreSQL's backends),
read from /proc."""
import os


def tree(pid):
    """The pid and its direct children (gunicorn workers)."""
    kids = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        pass
    return [pid] + kids


def cpu_ticks(pid):
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total

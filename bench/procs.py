"""CPU time and memory of a process and its direct children (gunicorn's workers, PostgreSQL's
backends), and how busy the machine is, read from /proc."""
import os
import time


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


def stat(pid):
    """The fields of /proc/PID/stat after the command name (state first)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_ticks(pid):
    total = 0
    for p in tree(pid):
        try:
            fields = stat(p)
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def ended_children_ticks(pid):
    """User and system CPU of the children of `pid` that have ended and been waited for."""
    fields = stat(pid)
    return int(fields[13]) + int(fields[14])


def memory_kib(pid):
    """(VmHWM summed, RssAnon summed) over the process tree, in KiB."""
    hwm = anon = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm += int(line.split()[1])
                    elif line.startswith("RssAnon:"):
                        anon += int(line.split()[1])
        except OSError:
            pass
    return hwm, anon


def machine_ticks():
    """The cpu line of /proc/stat: user, nice, system, idle, iowait, irq, softirq, steal, ..."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def machine_jiffies():
    v = machine_ticks()
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy, busy + v[3] + v[4]


def wait_quiet(limit_s, pct=10):
    """Waits (at most limit_s) for 3 consecutive seconds under pct % busy."""
    quiet, t0 = 0, time.time()
    while time.time() - t0 < limit_s:
        b0, t_0 = machine_jiffies()
        time.sleep(1)
        b1, t_1 = machine_jiffies()
        quiet = quiet + 1 if 100 * (b1 - b0) / max(1, t_1 - t_0) < pct else 0
        if quiet >= 3:
            return

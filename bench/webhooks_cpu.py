#!/usr/bin/env python3
"""Where W4's CPU goes with and without 3 webhooks, on SQLite: per request, the machine's time
by kind (user, system, idle, iowait, soft interrupts, from /proc/stat) and coursed's by thread
(the writer, the flusher, the request workers, the webhooks' deliveries). Alternates without
and with in each round, each start on a fresh copy of the same data, with bench/webhooks.py's
server and receivers.

    python3 bench/webhooks_cpu.py [--rounds 3]

A diagnosis, not a target: what the deliveries take from the writes when the machine is not
saturated (so they do not wait), and what they take from idle time. Build first:
cargo build --release --bin coursed --example webhook_load (bench/webhooks.sh does).
"""
import argparse
import collections
import os

import webhooks
from bench import catalogue_100, fresh_copy
from procs import machine_ticks
from workloads import CLK, first_id, wrk

KINDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]


def threads(pid):
    """The CPU ticks of the threads of `pid`, summed by thread name."""
    out = collections.Counter()
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[name] += int(fields[11]) + int(fields[12])
        except OSError:
            pass  # a thread that ended meanwhile
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    webhooks.run_options(ap)
    args = ap.parse_args()
    args.no_pg = True
    work, out, data_dir, pristine = catalogue_100(args, "webhooks")
    run_db = os.path.join(work, "run.db")
    module = first_id(data_dir, "module_ids.txt")
    seconds = sum(float(d.rstrip("s")) for d in (args.duration, args.warmup))
    print("µs per W4 request (the warm-up's CPU counted at the measured rate)")
    for rnd in range(1, args.rounds + 1):
        for variant in ("without", "with"):
            s = webhooks.server(args, f"cpu-{variant}", run_db, lambda: fresh_copy(pristine, run_db))
            s.prepare()
            s.start(os.path.join(out, f"cpu-{variant}-{rnd}.log"))
            receivers = webhooks.Receivers(args, run_db, f"127.0.0.1:{s.port}", module) if variant == "with" else None
            try:
                m0, t0 = machine_ticks(), threads(s.proc.pid)
                r = wrk(s, "W4", args, data_dir, out, f"cpu-{variant}-{rnd}")
                m1, t1 = machine_ticks(), threads(s.proc.pid)
                per = 1e6 / CLK / (r["rps"] * seconds)
                kinds = " ".join(f"{k} {(b - a) * per:.0f}" for k, a, b in zip(KINDS, m0, m1) if k in
                                 ("user", "system", "idle", "iowait", "softirq"))
                byname = ", ".join(f"{k} {(t1[k] - t0.get(k, 0)) * per:.0f}" for k in sorted(t1)
                                   if t1[k] > t0.get(k, 0))
                print(f"round {rnd} {variant:7} {r['rps']:6.0f} req/s  machine: {kinds}  coursed: {byname}",
                      flush=True)
            finally:
                if receivers:
                    receivers.stop()
                s.stop()


if __name__ == "__main__":
    main()

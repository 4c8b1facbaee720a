#!/usr/bin/env python3
"""Webhooks under load, on SQLite and (when its server binaries are installed) PostgreSQL:

- W4 and W5 (wrk, as bench.py runs them) on coursed with 3 webhooks to local receivers against
  coursed without any, alternating in each round, each start on a fresh copy of the same data;
  target: with / without >= 0.95. The receivers (examples/webhook_load.rs) take every delivery
  on keep-alive connections and answer 204. They stand for other systems, which run on other
  machines: here they share the two cores, so they take only the CPU time the server and its
  database leave (SCHED_IDLE, in a session of their own at nice 19), as the deliveries do.
  Deliveries wait while requests saturate the machine (up to 60 s): each line says how many
  were made during the run and how long the rest took after it, and `all` is every CPU second
  the work took (coursed, its database, the receivers) from the run's start until the last
  delivery, per request: what the deliveries cost, wherever they ran.
- The lag of deliveries (from a revision's commit to its receipt) with 3 webhooks while
  subjects are created at 500 per second for 20 s; target: p99 <= 2 s.

    bench/webhooks.py [--rounds 2] [--no-pg] [--rate 500] [--seconds 20] [--database-core]

--database-core puts PostgreSQL on a core of its own and everything else on the other, as when
the database runs on a machine of its own: what webhooks then cost the writes is what they ask
of the database (reading each revision back once per server) and of coursed's own core.

Build first: cargo build --release --bin coursed --example webhook_load (bench/webhooks.sh does).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

from bench import catalogue_100, coursed_bin, fresh_copy, pg_pristine
from procs import cpu_ticks, tree
from servers import Server, log
from workloads import CLK, TOKEN, first_id, wrk

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RECEIVERS = 3
MIN_RATIO, MAX_LAG_P99_MS = 0.95, 2000


def idle():
    """The receivers stand for other machines: on this one they take only the CPU time the
    server and its database leave, as the deliveries do. SCHED_IDLE alone ranks them below the
    processes of their own autogroup only (Linux groups processes by session, and weighs the
    groups against each other); PostgreSQL's backends each start a session of their own, so the
    receivers also get a session of their own, its group at the lowest weight (nice 19)."""
    os.setsid()
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("19")
    except OSError:
        pass  # no autogroups (a kernel without them, or a cgroup of its own): SCHED_IDLE does it
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


class Receivers:
    """examples/webhook_load with RATE 0: adds the webhooks, then takes deliveries until stopped."""

    def __init__(self, args, database, addr, module, seconds=600):
        argv = [os.path.join(args.target_dir, args.profile, "examples", "webhook_load"), coursed_bin(args), database,
                addr, TOKEN, module, str(RECEIVERS), "0", str(seconds)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, preexec_fn=idle)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise SystemExit(f"the receivers did not start: {line}{self.proc.stderr.read()}")

    def count(self):
        """How many deliveries the receivers took so far."""
        self.proc.stdin.write("count\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line.startswith("took "):
            raise SystemExit(f"the receivers said {line!r}: {self.proc.stderr.read()}")
        return int(line.split()[1])

    def drained(self, quiet_s=1.5, limit_s=300):
        """Waits until no delivery came for `quiet_s`: the count, and the seconds from the call
        to the last delivery."""
        start = time.monotonic()
        last, last_at = self.count(), start
        while time.monotonic() - last_at < quiet_s and time.monotonic() - start < limit_s:
            time.sleep(0.1)
            n = self.count()
            if n != last:
                last, last_at = n, time.monotonic()
        return last, last_at - start

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def run_options(ap, idle_wait=30):
    """The options of a wrk run and of the build measured, shared by the webhooks' benchmarks."""
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--warmup", default="3s")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--idle-wait", type=int, default=idle_wait)
    ap.add_argument("--profile", default="release")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")))


def apart_cores(cluster):
    """The cluster's processes on the last core (the backends it starts later inherit it), this
    process and what it starts (coursed, wrk, the receivers) on the others."""
    last = max(os.sched_getaffinity(0))
    with open(os.path.join(cluster.data, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    for pid in tree(postmaster):
        os.sched_setaffinity(pid, {last})
    os.sched_setaffinity(0, os.sched_getaffinity(0) - {last})
    log(f"PostgreSQL on core {last}; coursed, wrk and the receivers on {sorted(os.sched_getaffinity(0))}")


def server(args, name, database, prepare, db_ticks=None):
    argv = [coursed_bin(args), "serve", "--port", "0", "--database", database, "--token", TOKEN,
            "--log-level", "warn", "--access-log", "off"]
    return Server(name, argv, ready_line="listening on http://", prepare=prepare, db_ticks=db_ticks)


def throughput(args, engine, database, prepare, data_dir, out, db_ticks=None):
    """{(variant, workload): [rps per round]}."""
    module = first_id(data_dir, "module_ids.txt")
    rps = {}
    for rnd in range(1, args.rounds + 1):
        for variant in ("without", "with"):
            s = server(args, f"{engine}-{variant}", database, prepare, db_ticks)
            s.prepare()
            s.start(os.path.join(out, f"{engine}-{variant}-{rnd}.log"))
            receivers = Receivers(args, database, f"127.0.0.1:{s.port}", module) if variant == "with" else None
            try:
                theirs_ticks = (lambda: cpu_ticks(receivers.proc.pid)) if receivers else (lambda: 0)
                # Every tick the work takes: coursed's, its database's, the receivers'.
                all_ticks = lambda: cpu_ticks(s.proc.pid) + (db_ticks() if db_ticks else 0) + theirs_ticks()
                seconds = sum(float(d.rstrip("s")) for d in (args.duration, args.warmup))
                for w in ("W4", "W5"):
                    taken, everything = theirs_ticks(), all_ticks()
                    before = receivers.count() if receivers else 0
                    r = wrk(s, w, args, data_dir, out, f"{engine}-{variant}-{rnd}")
                    # Deliveries wait while requests saturate the machine: how many came during
                    # the run (warm-up included), and how long the rest took after it.
                    caught_up = ""
                    if receivers:
                        during = receivers.count() - before
                        total, after_s = receivers.drained()
                        if total > before:
                            caught_up = (f"  delivered during the run {100 * during / (total - before):.0f}%, "
                                         f"the rest {after_s:.1f} s after")
                    # The receivers stand for other machines: what they took of this one, about
                    # (over the warm-up too, per request of the measured window's rate).
                    per_req = 1e6 / CLK / (r["rps"] * seconds)
                    taken = theirs_ticks() - taken
                    theirs = f"  receivers ~{taken * per_req:.0f} µs/req" if receivers else ""
                    # All the CPU the work took, deliveries caught up included (per request, the
                    # same way): what the deliveries cost, wherever they ran.
                    theirs += f"{caught_up}  all ~{(all_ticks() - everything) * per_req:.0f} µs/req"
                    if r["non2xx"] or r["socket_errors"]:
                        raise SystemExit(f"{engine} {variant} {w}: {r['non2xx']} unexpected statuses, "
                                         f"{r['socket_errors']} socket errors")
                    rps.setdefault((variant, w), []).append(r["rps"])
                    db = f"  database {r['db_cpu_us_per_req']} µs/req" if db_ticks else ""
                    log(f"   {engine:8} {variant:8} {w}  {r['rps']:8.1f} req/s  p99 {r['p99_ms']:6.2f} ms  "
                        f"busy {r['machine_busy_pct']}%  coursed {r['cpu_us_per_req']} µs/req{db}{theirs}")
            finally:
                if receivers:
                    receivers.stop()
                s.stop()
    return rps


def lag(args, engine, database, prepare, data_dir, out):
    """The line examples/webhook_load prints at --rate for --seconds."""
    s = server(args, f"{engine}-lag", database, prepare)
    s.prepare()
    s.start(os.path.join(out, f"{engine}-lag.log"))
    try:
        argv = [os.path.join(args.target_dir, args.profile, "examples", "webhook_load"), coursed_bin(args), database,
                f"127.0.0.1:{s.port}", TOKEN, first_id(data_dir, "module_ids.txt"), str(RECEIVERS), str(args.rate),
                str(args.seconds)]
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        return done.stdout.strip().splitlines()[-1]
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--engines", default="sqlite,postgres", help="which engines to measure")
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=int, default=20)
    run_options(ap)
    ap.add_argument("--database-core", action="store_true",
                    help="PostgreSQL on one core, and coursed, wrk and the receivers on the other, as when the "
                         "database runs on a machine of its own")
    args = ap.parse_args()
    work, out, data_dir, pristine = catalogue_100(args, "webhooks")
    engines = []
    run_db = os.path.join(work, "run.db")
    if "sqlite" in args.engines:
        engines.append(("sqlite", run_db, lambda: fresh_copy(pristine, run_db)))
    args.no_pg = args.no_pg or "postgres" not in args.engines
    cluster = pg_pristine(args, work, pristine)
    if cluster and args.database_core:
        apart_cores(cluster)
    if cluster:
        engines.append(("postgres", cluster.url("coursed_work"),
                        lambda: cluster.fresh("coursed_work", "coursed_pristine")))
    missed = []
    lines = ["| engine | W4 with / without | W5 with / without | delivery lag |", "|---|---:|---:|---|"]
    try:
        for engine, database, prepare in engines:
            ticks = cluster.cpu_ticks if cluster and engine == "postgres" else None
            rps = throughput(args, engine, database, prepare, data_dir, out, ticks)
            ratios = {}
            for w in ("W4", "W5"):
                ratios[w] = statistics.median(rps[("with", w)]) / statistics.median(rps[("without", w)])
                if ratios[w] < MIN_RATIO:
                    missed.append(f"{engine} {w}")
            said = lag(args, engine, database, prepare, data_dir, out)
            log(f"   {engine}: {said}")
            p99 = int(said.split(" p99 ")[1].split()[0])
            if p99 > MAX_LAG_P99_MS:
                missed.append(f"{engine} lag")
            rounds = lambda w: ", ".join(f"{a / b:.2f}" for a, b in zip(rps[("with", w)], rps[("without", w)]))
            lines.append(f"| {engine} | {ratios['W4']:.2f} ({rounds('W4')}) | {ratios['W5']:.2f} ({rounds('W5')}) | "
                         f"{said} |")
    finally:
        if cluster:
            cluster.stop()
    print(f"\n{RECEIVERS} webhooks to local receivers; W4/W5 medians of {args.rounds} rounds (each round's ratio in "
          f"brackets); targets: >= {MIN_RATIO}, lag p99 <= {MAX_LAG_P99_MS} ms at {args.rate} creates/s\n")
    print("\n".join(lines))
    print("\nmissed: " + ", ".join(missed) if missed else "\nevery target met")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()

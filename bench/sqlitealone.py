"""SQLite alone: the writes of W4 and W5 made straight through coursed's store, with no HTTP
server, no JSON and no rendering (examples/store_alone.rs), on a fresh copy of the benchmark's
database in the rounds of the benchmark. It is the SQLite twin of pg-alone (pgalone.py): the
same rows, search words and revisions, written by one process with the writer's own group commit
and flush to disk (full durability, as `coursed serve` by default), from as many clients as
wrk's connections, each waiting for its write as a connection waits for its response. coursed
on SQLite cannot write faster than that on the same machine.

`rps` is rows written a second; `cpu_us_per_req` the process's CPU a row (SQLite's included: it
runs in the process); `capacity_rps` the rows a second of busy writer thread (its group commits
timed from its own trace), what the storage would write if its clients never kept it idle."""
import json
import os
import subprocess

from pgalone import seconds
from procs import machine_jiffies, wait_quiet

NAME = "sqlite-alone"
WORKLOADS = ["W4", "W5"]


class SqliteAlone:
    """Stands in the benchmark's list of servers: `measure` replaces a wrk run."""

    def __init__(self, binary, db, prepare):
        self.name, self.workloads = NAME, list(WORKLOADS)
        self.binary, self.db, self.prepare = binary, db, prepare
        self.proc = None

    def start(self, logfile, probe=None):
        return self

    def stop(self):
        pass

    def measure(self, w, args, out_dir, tag):
        if args.idle_wait:
            wait_quiet(args.idle_wait)
        m0, t0 = machine_jiffies()
        done = subprocess.run([self.binary, self.db, w, str(args.connections), str(seconds(args.warmup)),
                               str(seconds(args.duration))], capture_output=True, text=True)
        m1, t1 = machine_jiffies()
        with open(os.path.join(out_dir, f"{tag}_{w}.txt"), "w") as f:
            f.write(done.stdout + done.stderr)
        if done.returncode != 0:
            raise SystemExit(f"sqlite-alone {w}: exited {done.returncode}:\n{done.stderr[-2000:]}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        rows = r["rows"]
        return {
            "rps": rows / r["seconds"], "p50_ms": None, "p99_ms": None, "non2xx": 0, "last_non2xx": 0,
            "expect": "2xx", "bytes": 0, "bytes_per_req": None, "socket_errors": 0,
            "cpu_us_per_req": round(r["cpu_s"] * 1e6 / rows) if rows else None,
            "db_cpu_us_per_req": None,
            # The writer's capacity: rows a second of busy writer (what it would write if clients
            # never kept it waiting), information beside what the clients got through.
            "capacity_rps": r["writer_rows"] / r["writer_busy_s"] if r["writer_busy_s"] else None,
            # Warm-up included: the process runs both.
            "machine_busy_pct": round(100 * (m1 - m0) / max(1, t1 - t0)),
        }

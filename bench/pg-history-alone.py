#!/usr/bin/env python3
"""What recording history costs PostgreSQL itself, with no coursed: the PostgreSQL twin of
bench/history-alone.py. pg-alone's writes (pgalone.py: W4 creates a subject with its text and
words, W5 changes a subject's title, 8 rows a transaction from 16 pgbench clients, prepared
statements, the texts already in the database) run against coursed's schema on a throwaway
cluster with production durability, once with the history triggers recording and once with them
off (`ALTER TABLE subjects DISABLE TRIGGER ...`), each on a fresh copy of the same database,
alternating, in the same run. Prints rows/s of each and the ratio: the share of a write that
recording costs the database itself, which no code outside it can take back. (Recording here
leaves the revisions unsequenced: the feed's sequencer, which coursed runs after commit, is not
counted, so the ratio is if anything kind to recording.)

    bench/pg-history-alone.py [--coursed target/release/coursed] [--data SQLITE_FILE] [--rounds 3] [--seconds 8]

Without --data a catalogue of 100 modules x 100 subjects x 5 chapters is generated."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pg  # noqa: E402
from pgalone import PgAlone, pgbench, script  # noqa: E402

# The triggers that record a subject's revisions (migrations/postgres/0007-history.sql).
TRIGGERS = {"W4": "subjects_revision", "W5": "subjects_revision_update"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coursed", default=os.path.join(os.path.dirname(HERE), "target", "release", "coursed"))
    ap.add_argument("--data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--clients", type=int, default=16)
    args = ap.parse_args()
    if not pg.bindir():
        raise SystemExit("no PostgreSQL server binaries (apt-get install postgresql)")
    work = tempfile.mkdtemp(prefix="coursed-pg-history-alone-")
    os.chmod(work, 0o755)  # the cluster runs as the postgres user
    log = lambda m: print(m, file=sys.stderr, flush=True)
    data = args.data
    if not data:
        data = os.path.join(work, "catalogue.db")
        subprocess.run([args.coursed, "generate", "--database", data, "--modules", "100", "--subjects-per-module",
                        "100", "--chapters-per-subject", "5"], check=True, capture_output=True)
    cluster = pg.Cluster(os.path.join(work, "pg"), log).start()
    try:
        cluster.sql("CREATE DATABASE coursed_pristine")
        subprocess.run([args.coursed, "copy", "--from", data, "--to", cluster.url("coursed_pristine")],
                       check=True, capture_output=True)
        subjects, payloads = PgAlone.setup(cluster, "coursed_pristine")
        pgbench_bin = os.path.join(cluster.bin, "pgbench")
        results = {}
        for rnd in range(1, args.rounds + 1):
            for w in ("W4", "W5"):
                path = os.path.join(work, f"{w}.sql")
                with open(path, "w") as f:
                    f.write(script(w, subjects, payloads))
                for recording in (True, False):
                    cluster.fresh("bound_work", "bound_pristine")
                    if not recording:
                        cluster.sql(f"ALTER TABLE subjects DISABLE TRIGGER {TRIGGERS[w]}", db="bound_work")
                    out = pgbench([pgbench_bin, "-n", "-M", "prepared", f"-c{args.clients}", "-j2",
                                   f"-T{args.seconds}", "-f", path, cluster.url("bound_work")], w)
                    tps = float(next(l for l in out.splitlines() if l.startswith("tps = ")).split()[2])
                    rows = tps * 8
                    results.setdefault((w, recording), []).append(rows)
                    print(f"round {rnd} {w} history {'on ' if recording else 'off'}: {rows:8.0f} rows/s", flush=True)
        for w in ("W4", "W5"):
            on, off = statistics.median(results[(w, True)]), statistics.median(results[(w, False)])
            per_round = ", ".join(f"{a / b:.2f}" for a, b in zip(results[(w, True)], results[(w, False)]))
            print(f"{w}: history on {on:.0f}/s, off {off:.0f}/s, ratio {on / off:.3f} ({per_round}; median of {args.rounds})")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()

"""PostgreSQL alone: the writes of W4 and W5 sent by pgbench straight to coursed's schema, with no
HTTP server, no JSON and no coursed, on the cluster and in the rounds of the benchmark. It shows
what PostgreSQL itself can write on this machine, so that a target for coursed on PostgreSQL can
be read against it: coursed cannot write faster than the database it writes to.

pgbench gets every advantage coursed's group commit can have: as many clients as wrk's
connections (2 threads), 8 writes a transaction, prepared statements, and the texts already in the database (each write reads its
text from a table of (up to) 4,096 subjects of the catalogue, about what W4 sends, instead of receiving it
over the network):

    W4  INSERT INTO subjects ... what coursed's create runs (its triggers: the counts, the search
        log; the generated search column and its GIN index), the module (if any) checked to exist
    W5  UPDATE subjects SET title, title_words, updated_at ... (a title patch), rows in ascending
        order within a transaction so that concurrent ones cannot deadlock

`rps` is rows written a second; `cpu_us_per_req` is pgbench's own CPU a row, `db_cpu_us_per_req`
PostgreSQL's (every process of the cluster, finished ones included)."""
import os
import resource
import subprocess

from procs import machine_jiffies, wait_quiet
from workloads import CLK

NAME = "pg-alone"
WORKLOADS = ["W4", "W5"]
PER_TX = 8
PAYLOADS = 4096

SETUP = f"""
CREATE TABLE bound_payloads AS
    SELECT row_number() OVER (ORDER BY id) AS n, title, introduction, content, title_words,
           introduction_words, content_words, module_id
    FROM (SELECT * FROM subjects ORDER BY md5(id) LIMIT {PAYLOADS}) s;
CREATE UNIQUE INDEX ON bound_payloads (n);
CREATE TABLE bound_ids AS SELECT row_number() OVER (ORDER BY id) AS n, id FROM subjects;
CREATE UNIQUE INDEX ON bound_ids (n);
"""

INSERT = ("INSERT INTO subjects (id, created_at, updated_at, available_for_courses, content, introduction, title, "
          "content_words, introduction_words, title_words, module_id) "
          "SELECT gen_random_uuid()::text, now(), now(), true, content, introduction, title, content_words, "
          "introduction_words, title_words, module_id FROM bound_payloads p "
          "WHERE p.n = :p{i} AND (p.module_id IS NULL OR EXISTS (SELECT 1 FROM modules m WHERE m.id = p.module_id)) "
          "RETURNING 1 AS wrote \\gset")
UPDATE = ("UPDATE subjects SET title = p.title, title_words = p.title_words, updated_at = now() "
          "FROM bound_payloads p, bound_ids s WHERE p.n = :p{i} AND s.n = :s{i} AND subjects.id = s.id "
          "RETURNING 1 AS wrote \\gset")


def script(w, subjects, payloads):
    """A pgbench script of PER_TX writes in one transaction. Each must write exactly one row:
    `\\gset` aborts the run on a statement that returns none (a payload or an id that is not there),
    so that every committed transaction is PER_TX rows."""
    lines = []
    for i in range(PER_TX):
        lines.append(f"\\set p{i} random(1, {payloads})")
        # Each write of a transaction in its own slice of the ids, in order: no deadlocks.
        lo, hi = i * subjects // PER_TX + 1, (i + 1) * subjects // PER_TX
        lines.append(f"\\set s{i} random({lo}, {hi})")
    lines.append("BEGIN;")
    lines += [(INSERT if w == "W4" else UPDATE).format(i=i) for i in range(PER_TX)]
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


class PgAlone:
    """Stands in the benchmark's list of servers: `measure` replaces a wrk run."""

    def __init__(self, cluster, sizes):
        self.name, self.workloads = NAME, list(WORKLOADS)
        self.cluster, (self.subjects, self.payloads) = cluster, sizes
        self.proc = None
        self.prepare = lambda: cluster.fresh("bound_work", "bound_pristine")

    @staticmethod
    def setup(cluster, coursed_pristine):
        """bound_pristine: coursed's pristine database with the payloads and a numbering of the ids;
        returns how many subjects and payloads it holds."""
        cluster.fresh("bound_pristine", coursed_pristine)
        cluster.sql(SETUP, db="bound_pristine")
        cluster.sql("VACUUM ANALYZE", db="bound_pristine")
        subjects = int(cluster.sql("SELECT count(*) FROM bound_ids", db="bound_pristine"))
        payloads = int(cluster.sql("SELECT count(*) FROM bound_payloads", db="bound_pristine"))
        if subjects < PER_TX:
            raise SystemExit(f"pg-alone needs at least {PER_TX} subjects in the catalogue, not {subjects}")
        return subjects, payloads

    def start(self, logfile, probe=None):
        return self

    def stop(self):
        pass

    def measure(self, w, args, out_dir, tag):
        path = os.path.join(out_dir, f"{tag}_{w}.pgbench.sql")
        with open(path, "w") as f:
            f.write(script(w, self.subjects, self.payloads))
        argv = [os.path.join(self.cluster.bin, "pgbench"), "-n", "-M", "prepared", f"-c{args.connections}", "-j2", "--max-tries=10", "-f", path,
                self.cluster.url("bound_work")]
        if args.idle_wait:
            wait_quiet(args.idle_wait)
        pgbench(argv[:1] + [f"-T{seconds(args.warmup)}"] + argv[1:], w)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        d0, (m0, t0) = self.cluster.cpu_ticks(), machine_jiffies()
        out = pgbench(argv[:1] + [f"-T{seconds(args.duration)}"] + argv[1:], w)
        d1, (m1, t1) = self.cluster.cpu_ticks(), machine_jiffies()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(os.path.join(out_dir, f"{tag}_{w}.txt"), "w") as f:
            f.write(out)
        tps = float(next(l for l in out.splitlines() if l.startswith("tps = ")).split()[2])
        txs = int(next(l for l in out.splitlines() if l.startswith("number of transactions actually processed"))
                  .split(":")[1].split("/")[0])
        failed = next((int(l.split(":")[1].split()[0]) for l in out.splitlines()
                       if l.startswith("number of failed transactions")), 0)
        rows = txs * PER_TX
        client_s = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        return {
            "rps": tps * PER_TX, "p50_ms": None, "p99_ms": None, "non2xx": failed, "last_non2xx": 0,
            "expect": "2xx", "bytes": 0, "bytes_per_req": None, "socket_errors": 0,
            "cpu_us_per_req": round(client_s * 1e6 / rows) if rows else None,
            "db_cpu_us_per_req": round((d1 - d0) * 1e6 / CLK / rows) if rows else None,
            "machine_busy_pct": round(100 * (m1 - m0) / max(1, t1 - t0)),
        }


def pgbench(argv, w):
    """pgbench's report; a run that did not complete (a client aborted) ends the benchmark."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"pg-alone {w}: pgbench exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout


def seconds(d):
    """wrk's duration ("10s", "1m", "1h", "10") as pgbench's seconds."""
    unit = {"s": 1, "m": 60, "h": 3600}.get(d[-1:], None)
    return int(d[:-1]) * unit if unit else int(d)

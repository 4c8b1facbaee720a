"""How long a new coursed takes to upgrade a database of the first schema (version 1), on each
engine, and what it locks and takes on disk meanwhile (the figures of docs/upgrading.md).

    bench/upgrade.py [--modules 1000] [--subjects-per-module 1000] [--chapters-per-subject 2]
                     [--dir DIR] [--no-pg] [--smoke]

1. `coursed generate` makes a catalogue; its modules, subjects and chapters are copied into a new
   SQLite file made by schema.sql alone (version 1), as the first coursed left its databases.
2. PostgreSQL (a throwaway cluster, as bench/pg.py makes, with the settings below): the same rows
   go into a database made by schema.postgres.sql alone (counting triggers off while they stream
   in, the counts made once, as coursed's own bulk load does); `pg_dump --format=custom` is timed
   (the backup coursed asks for), then `coursed serve --backup-before-migrate off` is timed to its
   readiness line while another session samples, every second, the locks held on the resource
   tables and whether a read and a write of one row get through within 1 s.
3. SQLite: `coursed serve` on the version-1 file is timed to its readiness line (the backup it
   writes first included), the folder's size sampled every second.

Each run prints coursed's log of the migration (each step's duration, the commit, the backup).
Needs a release build (made here), python3, and for PostgreSQL its server binaries. Disk: at the
default size, about 36 GB in DIR at the peak; --smoke makes a tiny catalogue, in seconds.
"""
import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

import pg

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOKEN = "4b8e2f9a1c7d3e6f0a5b9c2d8e1f4a7b"
# The server's settings for this benchmark: enough WAL between checkpoints for a large migration.
PG_SETTINGS = "shared_buffers = 1GB\nmax_wal_size = 8GB\n"
COLUMNS = {
    "modules": "id, title, introduction, content, external_id, created_at, updated_at",
    "subjects": "id, title, introduction, content, external_id, available_for_courses, module_id, created_at, "
                "updated_at",
    "chapters": "id, title, content, position, subject_id, created_at, updated_at",
}


def log(message):
    print(message, flush=True)


def size_of(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if os.path.exists(os.path.join(d, f)))


class Sampler(threading.Thread):
    """Calls `sample` every second until stopped; keeps what it returns."""

    def __init__(self, sample):
        super().__init__(daemon=True)
        self.sample, self.samples, self.stopped = sample, [], threading.Event()

    def run(self):
        while not self.stopped.is_set():
            self.samples.append((time.time(), self.sample()))
            self.stopped.wait(1)

    def stop(self):
        self.stopped.set()
        self.join()
        return self.samples


def serve_until_ready(binary, args):
    """Starts `coursed serve ARGS`, waits for its readiness line, stops it: seconds to ready
    and its log."""
    started = time.time()
    p = subprocess.Popen([binary, "serve", "--port", "0", "--token", TOKEN, "--log-level", "info", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
    reader.start()
    for line in p.stdout:
        if line.startswith("listening on "):
            break
    took = time.time() - started
    p.terminate()
    p.wait()
    reader.join()
    if p.returncode != 0:
        raise SystemExit("coursed serve failed:\n" + "".join(lines))
    return took, [l.rstrip() for l in lines if "migrat" in l or "backed up" in l or "search words" in l]


def version_1_sqlite(binary, shape, path):
    """A SQLite file of schema 1 holding a generated catalogue."""
    generated = path + ".generated"
    started = time.time()
    subprocess.run([binary, "generate", "--database", generated, *shape], check=True, stdout=subprocess.DEVNULL)
    log(f"generated the catalogue in {time.time() - started:.0f} s")
    c = sqlite3.connect(path, isolation_level=None)
    c.executescript("PRAGMA page_size = 8192; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
    c.executescript(open(os.path.join(ROOT, "schema.sql")).read())
    c.executescript("PRAGMA user_version = 1; PRAGMA application_id = 1668445028;")
    c.execute("ATTACH ? AS g", (generated,))
    c.execute("BEGIN")
    for table, columns in COLUMNS.items():
        c.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM g.{table}")
    c.execute("COMMIT")
    c.execute("DETACH g")
    c.close()
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(generated + suffix):
            os.remove(generated + suffix)
    log(f"schema-1 SQLite file: {size_of(path) / 1e9:.1f} GB")


def version_1_postgres(cluster, source, db):
    """Database `db` of schema 1 holding the rows of the SQLite file `source`."""
    cluster.sql(f"CREATE DATABASE {db}")
    schema = open(os.path.join(ROOT, "schema.postgres.sql")).read()
    subprocess.run([os.path.join(cluster.bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", cluster.url(db)],
                   input=schema + "\nINSERT INTO coursed_schema (version) VALUES (1);", text=True, check=True,
                   stdout=subprocess.DEVNULL)
    cluster.sql("ALTER TABLE modules DISABLE TRIGGER USER; ALTER TABLE subjects DISABLE TRIGGER USER; "
                "ALTER TABLE chapters DISABLE TRIGGER USER", db)
    rows = sqlite3.connect(source)
    for table, columns in COLUMNS.items():
        copy = subprocess.Popen([os.path.join(cluster.bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                                 cluster.url(db), "-c", f"\\copy {table} ({columns}) FROM STDIN WITH (FORMAT text)"],
                                stdin=subprocess.PIPE, text=True)
        for row in rows.execute(f"SELECT {columns} FROM {table}"):
            copy.stdin.write("\t".join(text_field(v) for v in row) + "\n")
        copy.stdin.close()
        if copy.wait() != 0:
            raise SystemExit(f"loading {table} into PostgreSQL failed")
    cluster.sql("""INSERT INTO row_counts (tbl, parent, slot, n, gen)
        SELECT 'modules', '', 0, count(*), count(*) FROM modules
        UNION ALL SELECT 'subjects', '', 0, count(*), count(*) FROM subjects
        UNION ALL SELECT 'chapters', '', 0, count(*), count(*) FROM chapters
        UNION ALL SELECT 'subjects.module_id', module_id, 0, count(*), count(*) FROM subjects
            WHERE module_id IS NOT NULL GROUP BY module_id
        UNION ALL SELECT 'chapters.subject_id', subject_id, 0, count(*), count(*) FROM chapters GROUP BY subject_id;
        ALTER TABLE modules ENABLE TRIGGER USER; ALTER TABLE subjects ENABLE TRIGGER USER;
        ALTER TABLE chapters ENABLE TRIGGER USER;""", db)
    cluster.sql("VACUUM ANALYZE", db)
    log(f"schema-1 PostgreSQL database: {int(cluster.sql(f'SELECT pg_database_size({db!r})', db)) / 1e9:.1f} GB")


def text_field(v):
    """A value in COPY's text format."""
    if v is None:
        return "\\N"
    return str(v).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def locks_and_probes(cluster, db, subject):
    """One sample: the locks other sessions hold on the resource tables, and whether a read and
    a write of one subject get through within 1 s."""
    held = cluster.sql("""SELECT string_agg(DISTINCT c.relname || ':' || l.mode, ' ') FROM pg_locks l
        JOIN pg_class c ON c.oid = l.relation
        WHERE l.granted AND l.pid <> pg_backend_pid() AND c.relname IN ('modules', 'subjects', 'chapters')""", db)

    def gets_through(statement):
        try:
            cluster.sql(f"SET lock_timeout = '1s'; {statement}", db)
            return True
        except subprocess.CalledProcessError:
            return False
    read = gets_through(f"SELECT title FROM subjects WHERE id = '{subject}'")
    write = gets_through(f"BEGIN; UPDATE subjects SET title = title WHERE id = '{subject}'; ROLLBACK")
    return held, read, write


def report_locks(samples):
    first, last, blocked = {}, {}, []
    for at, (held, read, write) in samples:
        for lock in (held or "").split():
            first.setdefault(lock, at)
            last[lock] = at
        blocked.append((at, read, write))
    start = samples[0][0] if samples else 0
    for lock in sorted(first, key=first.get):
        log(f"  {lock:40} held from {first[lock] - start:5.0f} s to {last[lock] - start:5.0f} s")
    refused = [at - start for at, read, write in blocked if not (read and write)]
    if refused:
        log(f"  a read or write of one subject waited past 1 s from {refused[0]:.0f} s to {refused[-1]:.0f} s "
            f"({len(refused)} of {len(blocked)} probes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", type=int, default=1000)
    ap.add_argument("--subjects-per-module", type=int, default=1000)
    ap.add_argument("--chapters-per-subject", type=int, default=2)
    ap.add_argument("--dir", help="scratch folder (default: a new one in TMPDIR)")
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    ap.add_argument("--smoke", action="store_true", help="a tiny catalogue, to see that the script runs")
    a = ap.parse_args()
    if a.smoke:
        a.modules, a.subjects_per_module = 10, 100
    shape = ["--modules", str(a.modules), "--subjects-per-module", str(a.subjects_per_module),
             "--chapters-per-subject", str(a.chapters_per_subject)]
    subprocess.run(["cargo", "build", "--release", "--locked", "--bin", "coursed"], cwd=ROOT, check=True,
                   stderr=subprocess.DEVNULL)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = os.path.join(target, "release", "coursed")
    scratch = tempfile.mkdtemp(prefix="coursed-upgrade-", dir=a.dir)
    # The cluster's own folder in it belongs to the postgres user when run as root.
    os.chmod(scratch, 0o755)
    try:
        v1 = os.path.join(scratch, "course.db")
        log(f"{a.modules} modules x {a.subjects_per_module} subjects x {a.chapters_per_subject} chapters")
        version_1_sqlite(binary, shape, v1)
        if not a.no_pg and pg.bindir():
            cluster = pg.Cluster(os.path.join(scratch, "pg"), log)
            pg.SETTINGS += PG_SETTINGS
            cluster.start()
            try:
                version_1_postgres(cluster, v1, "v1")
                dump = os.path.join(scratch, "coursed-schema-1.dump")
                started = time.time()
                subprocess.run([os.path.join(cluster.bin, "pg_dump"), "--format=custom", f"--file={dump}",
                                cluster.url("v1")], check=True)
                log(f"pg_dump --format=custom: {time.time() - started:.1f} s, {size_of(dump) / 1e9:.2f} GB")
                os.remove(dump)
                subject = cluster.sql("SELECT id FROM subjects ORDER BY id LIMIT 1", "v1")
                sampler = Sampler(lambda: locks_and_probes(cluster, "v1", subject))
                disk = Sampler(lambda: size_of(cluster.data))
                sampler.start(), disk.start()
                took, said = serve_until_ready(binary, ["--database", cluster.url("v1"),
                                                        "--backup-before-migrate", "off"])
                samples, sizes = sampler.stop(), disk.stop()
                log(f"PostgreSQL: ready after {took:.1f} s")
                for line in said:
                    log("  " + line)
                report_locks(samples)
                after = int(cluster.sql("SELECT pg_database_size('v1')", "v1"))
                log(f"  database {after / 1e9:.1f} GB after; the cluster's files peaked at "
                    f"{max(s for _, s in sizes) / 1e9:.1f} GB")
            finally:
                cluster.stop()
        before = size_of(v1)
        disk = Sampler(lambda: size_of(scratch))
        disk.start()
        took, said = serve_until_ready(binary, ["--database", v1])
        sizes = disk.stop()
        log(f"SQLite: ready after {took:.1f} s")
        for line in said:
            log("  " + line)
        log(f"  file {before / 1e9:.1f} GB before, {size_of(v1) / 1e9:.1f} GB after; the folder peaked at "
            f"{max(s for _, s in sizes) / 1e9:.1f} GB (with the backup)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

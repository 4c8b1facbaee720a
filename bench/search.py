#!/usr/bin/env python3
"""Search at scale (run it through bench/search.sh, which builds the release binary first).

On the generated 1,000,000-subject catalogue (10,000 modules x 100 subjects, 2 chapters each, as
the benchmark's scale run), on SQLite and on a throwaway PostgreSQL cluster (bench/pg.py):

- p50 and p90 of `GET /v1/subjects?filter[search]=WORD` (a page of 20 with its total) for a word
  of the generator's vocabulary, which nearly every subject holds, and for a rare word, that 10
  subjects created through the API before the timing hold;
- W4 (bench/load/w4_create_subject.lua under wrk) with the search index, then on the same
  database with the index removed (SQLite: the FTS5 table and its triggers; PostgreSQL: the
  generated tsvector, its GIN index, the GIN index of the titles and the triggers logging its words for the word counts;
  coursed still computes the words in both), same run.

Prints one JSON object; --modules and --subjects-per-module make the catalogue smaller.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pg import Cluster  # noqa: E402

TOKEN = "bench-token"
BIN = os.path.join(HERE, "..", "target", "release", "coursed")
COMMON = "course"
RARE = "zygomorphic"


def run(argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


class Server:
    def __init__(self, database, log):
        self.proc = subprocess.Popen([BIN, "serve", "--port", "0", "--database", database, "--token", TOKEN,
                                      "--log-level", "warn", "--compression", "off"],
                                     stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"coursed did not start: {line!r} (see {log})")
        self.base = line.strip().split("listening on ")[1]
        self.origin = self.base.rsplit("/v1", 1)[0]
        host, port = self.base.split("//")[1].split("/")[0].split(":")
        self.conn = http.client.HTTPConnection(host, int(port))

    def request(self, method, path, body=None):
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/vnd.api+json"}
        if body is not None:
            headers["Content-Type"] = "application/vnd.api+json"
        self.conn.request(method, "/v1" + path, body=body, headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data) if data else None

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def timed(server, path, n):
    server.request("GET", path)  # warm
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        doc = server.request("GET", path)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"p50_ms": round(statistics.median(times), 2), "p90_ms": round(times[int(len(times) * 0.9) - 1], 2),
            "total": doc["meta"]["page"]["total"], "returned": len(doc["data"])}


def w4(server, data_dir, seconds):
    env = {**os.environ, "BENCH_DATA": data_dir, "BENCH_TOKEN": TOKEN, "BENCH_EXPECT_STATUS": "2xx"}
    script = os.path.join(HERE, "load", "w4_create_subject.lua")
    out = subprocess.run(["wrk", "-t1", "-c16", f"-d{seconds}s", "--timeout", "30s", "-s", script, server.origin],
                         env=env, check=True, capture_output=True, text=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("RESULT"))
    r = dict(kv.split("=", 1) for kv in line.split()[1:])
    return {"rps": float(r["rps"]), "p50_ms": int(r["p50_us"]) / 1000, "non2xx": int(r["non2xx"])}


DROP_SQLITE = """
DROP TRIGGER subjects_search_insert; DROP TRIGGER subjects_search_delete; DROP TRIGGER subjects_search_update;
DROP TABLE subjects_search;
"""
DROP_PG = ("DROP TRIGGER subjects_search_changed ON subjects; DROP TRIGGER subjects_search_updated ON subjects; "
           "ALTER TABLE subjects DROP COLUMN search; DROP INDEX subjects_titles")


def measure(label, database, data_dir, work, args, drop):
    log = os.path.join(work, f"{label}.log")
    s = Server(database, log)
    try:
        for i in range(10):
            body = json.dumps({"data": {"type": "subjects", "attributes": {
                "title": f"Rare flowers {i}", "introduction": f"A {RARE} flower, number {i}"}}})
            s.request("POST", "/subjects", body)
        out = {
            "common": timed(s, f"/subjects?filter%5Bsearch%5D={COMMON}", args.requests),
            "common_prefix": timed(s, f"/subjects?filter%5Bsearch%5D={COMMON[:4]}*", args.requests),
            "rare": timed(s, f"/subjects?filter%5Bsearch%5D={RARE}", args.requests),
            "w4_with_index": w4(s, data_dir, args.w4_seconds),
        }
    finally:
        s.stop()
    drop()
    s = Server(database, log + ".noindex")
    try:
        out["w4_without_index"] = w4(s, data_dir, args.w4_seconds)
    finally:
        s.stop()
    out["w4_cost_ratio"] = round(out["w4_without_index"]["rps"] / out["w4_with_index"]["rps"], 2)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", type=int, default=10000)
    ap.add_argument("--subjects-per-module", type=int, default=100)
    ap.add_argument("--chapters-per-subject", type=int, default=2)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--w4-seconds", type=int, default=10)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--sqlite-database", help="an existing generated SQLite catalogue to use (and change)")
    ap.add_argument("--postgres-url", help="an existing generated PostgreSQL catalogue to use (and change), "
                    "with its ids in --ids-dir, instead of a throwaway cluster")
    ap.add_argument("--ids-dir", help="the --ids-dir of the generation of --postgres-url")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="coursed-search-")
    os.chmod(work, 0o755)  # the PostgreSQL cluster below it runs as another user
    shape = ["--modules", str(args.modules), "--subjects-per-module", str(args.subjects_per_module),
             "--chapters-per-subject", str(args.chapters_per_subject)]
    results = {"shape": shape}
    try:
        db = os.path.join(work, "coursed.db")
        t0 = time.perf_counter()
        if args.sqlite_database:
            db = args.sqlite_database
            run(["sqlite3", db, f".once {os.path.join(work, 'module_ids.txt')}", "SELECT id FROM modules"])
        elif not args.no_sqlite:
            run([BIN, "generate", "--database", db, "--ids-dir", work] + shape)
            results["sqlite_generate_s"] = round(time.perf_counter() - t0, 1)
        results["sqlite"] = None if args.no_sqlite else measure("sqlite", db, work, work, args,
                                    lambda: run(["sqlite3", db, DROP_SQLITE]) if shutil.which("sqlite3")
                                    else __import__("sqlite3").connect(db).executescript(DROP_SQLITE))
        print(json.dumps(results["sqlite"]), file=sys.stderr)
        if args.postgres_url:
            psql = lambda sql: subprocess.run(["psql", "-X", "-qAt", "-v", "ON_ERROR_STOP=1", "-d", args.postgres_url,
                                               "-c", sql], check=True, capture_output=True)
            results["postgres"] = measure("postgres", args.postgres_url, args.ids_dir, work, args,
                                          lambda: psql(DROP_PG))
        elif not args.no_pg:
            cluster = Cluster(os.path.join(work, "pg"), lambda m: print(m, file=sys.stderr))
            cluster.start()
            try:
                cluster.sql("CREATE DATABASE coursed")
                url = cluster.url("coursed")
                t0 = time.perf_counter()
                run([BIN, "generate", "--database", url, "--ids-dir", work] + shape)
                results["postgres_generate_s"] = round(time.perf_counter() - t0, 1)
                results["postgres"] = measure("postgres", url, work, work, args,
                                              lambda: cluster.sql(DROP_PG, db="coursed"))
            finally:
                cluster.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

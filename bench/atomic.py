#!/usr/bin/env python3
"""Atomic operations against single requests: a module with 100 subjects and 500 chapters
created by one `POST /v1/operations` (601 operations, `lid`s linking them) and by 601 single
POSTs one after the other, as a client would send them, on a fresh coursed of each engine.

    bench/atomic.py [--rounds 5] [--bin target/release/coursed] [--no-postgres]

Both ways run alternately in the same run; the ratio of the medians is the result (target: the
atomic request >= 5 x faster end to end). Only the standard library is used.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pg import Cluster, bindir  # noqa: E402

JSONAPI = "application/vnd.api+json"
ATOMIC = JSONAPI + '; ext="https://jsonapi.org/ext/atomic"'
TOKEN = "bench-token"
SUBJECTS, CHAPTERS_PER_SUBJECT = 100, 5


def start(binary, database):
    proc = subprocess.Popen([binary, "serve", "--port", "0", "--database", database, "--token", TOKEN,
                             "--log-level", "warn"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    for line in proc.stdout:
        if "listening on http://" in line:
            port = int(line.split("listening on http://", 1)[1].split("/")[0].rsplit(":", 1)[1])
            return proc, port
        if time.time() > deadline:
            break
    proc.kill()
    raise SystemExit(f"coursed did not start on {database}")


def request(conn, method, path, body, content_type=JSONAPI):
    conn.request(method, path, body=json.dumps(body),
                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type, "Accept": JSONAPI})
    r = conn.getresponse()
    data = r.read()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
    return json.loads(data) if data else None


def one_by_one(conn, n):
    module = request(conn, "POST", "/v1/modules",
                     {"data": {"type": "modules", "attributes": {"title": f"Course {n}"}}})["data"]["id"]
    for s in range(SUBJECTS):
        subject = request(conn, "POST", "/v1/subjects", {"data": {
            "type": "subjects", "attributes": {"title": f"Subject {s}", "introduction": "Intro", "content": "Text"},
            "relationships": {"module": {"data": {"type": "modules", "id": module}}}}})["data"]["id"]
        for c in range(CHAPTERS_PER_SUBJECT):
            request(conn, "POST", "/v1/chapters", {"data": {
                "type": "chapters", "attributes": {"title": f"Chapter {c}", "position": c, "content": "Text"},
                "relationships": {"subject": {"data": {"type": "subjects", "id": subject}}}}})


def atomic(conn, n):
    ops = [{"op": "add", "data": {"type": "modules", "lid": "m", "attributes": {"title": f"Course {n}"}}}]
    for s in range(SUBJECTS):
        ops.append({"op": "add", "data": {
            "type": "subjects", "lid": f"s{s}", "attributes": {"title": f"Subject {s}", "introduction": "Intro", "content": "Text"},
            "relationships": {"module": {"data": {"type": "modules", "lid": "m"}}}}})
        for c in range(CHAPTERS_PER_SUBJECT):
            ops.append({"op": "add", "data": {
                "type": "chapters", "attributes": {"title": f"Chapter {c}", "position": c, "content": "Text"},
                "relationships": {"subject": {"data": {"type": "subjects", "lid": f"s{s}"}}}}})
    results = request(conn, "POST", "/v1/operations", {"atomic:operations": ops}, ATOMIC)["atomic:results"]
    assert len(results) == 1 + SUBJECTS * (1 + CHAPTERS_PER_SUBJECT)


def measure(name, binary, database, rounds):
    proc, port = start(binary, database)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        times = {"single": [], "atomic": []}
        n = 0
        for _ in range(rounds):
            for way, run in (("single", one_by_one), ("atomic", atomic)):
                n += 1
                t0 = time.perf_counter()
                run(conn, n)
                times[way].append(time.perf_counter() - t0)
        single, whole = statistics.median(times["single"]), statistics.median(times["atomic"])
        ratio = single / whole
        print(f"{name:10} 601 single POSTs {single * 1000:8.1f} ms   one atomic request {whole * 1000:7.1f} ms   "
              f"ratio {ratio:5.1f} x  (target >= 5)  {'met' if ratio >= 5 else 'MISSED'}")
        return ratio >= 5
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", default="target/release/coursed")
    ap.add_argument("--no-postgres", action="store_true")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # the cluster runs as the postgres user when this runs as root
        ok &= measure("SQLite", args.bin, os.path.join(tmp, "atomic.db"), args.rounds)
        if not args.no_postgres and bindir():
            cluster = Cluster(os.path.join(tmp, "pg"), print).start()
            try:
                cluster.sql("CREATE DATABASE atomic")
                ok &= measure("PostgreSQL", args.bin, cluster.url("atomic"), args.rounds)
            finally:
                cluster.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Following a district, on SQLite and (when its server binaries are installed) PostgreSQL;
the school on the same engine as the district:

- Catching up: a district of 100 modules, 10,000 subjects and 50,000 chapters (60,100
  revisions in its feed, one `create` each) served by coursed; `coursed follow` (once) into an
  empty database reads its feed over HTTP and applies it. Target: >= 5,000 revisions/s. The
  same revisions as a delta (`coursed export --since 0`) imported by `coursed import` show what
  the applying alone costs, and a plain `coursed import` of the catalogue (the bulk load, the
  fastest way a database is filled) is the reference measured in the same run.
- Lag: the district written to at 500 creates/s for 20 s (W4's bodies, examples/webhook_load
  without receivers) while a school server follows it live (`serve --follow`). Each create's
  lag is when a client of the school's live stream receives it less the district's
  `created_at` (when the district committed it): same machine, same clock. Target: p99 <= 2 s.

    bench/follow.py [--rounds 3] [--no-pg] [--rate 500] [--seconds 20]

Build first: cargo build --release --bin coursed --example webhook_load (bench/follow.sh does).
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from bench import catalogue_100, coursed_bin, fresh_copy, pg_pristine
from servers import Server, log, run
from workloads import TOKEN, first_id

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MIN_RATE, MAX_LAG_P99_MS = 5000, 2000


def server(args, name, database, extra=()):
    argv = [coursed_bin(args), "serve", "--port", "0", "--database", database, "--token", TOKEN,
            "--log-level", "warn", "--access-log", "off", *extra]
    return Server(name, argv, ready_line="listening on http://")


def get(url):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def feed_head(s):
    return int(get(f"{s.url()}/v1/revisions?page%5Bsize%5D=1")["meta"]["head"])


def caught_up(school, head, within, fault):
    """Waits until `school` has applied its district's feed up to `head`."""
    deadline = time.time() + within
    while int(get(f"{school.url()}/readyz")["follow"]["cursor"]) < head:
        if time.time() > deadline:
            raise SystemExit(f"{fault} within {within} s")
        time.sleep(0.1)


def timed(argv):
    t0 = time.perf_counter()
    run(argv)
    return time.perf_counter() - t0


def catch_up(args, engine, district_db, new_db, work, out, rnd):
    """Seconds taken by `coursed follow`, `coursed import` of the delta, and `coursed import` of
    the plain export, each into an empty database; and the revisions."""
    s = server(args, f"{engine}-district", district_db)
    s.start(os.path.join(out, f"{engine}-district-{rnd}.log"))
    try:
        revisions = feed_head(s)
        target = new_db("follow")
        follow = timed([coursed_bin(args), "follow", "--database", target, "--upstream", s.url(), "--token", TOKEN])
        got = int(subprocess.run([coursed_bin(args), "export", "--database", target, "--since", "0", "--output", "-"],
                                 capture_output=True, text=True, check=True).stdout.count("\n")) - 2
        # The school's own feed holds one revision per revision applied (creates only here).
        if got != revisions:
            raise SystemExit(f"{engine}: the follower applied {got} revisions of {revisions}")
    finally:
        s.stop()
    delta = os.path.join(work, "delta.jsonl")
    plain = os.path.join(work, "plain.jsonl")
    for path, flags in ((delta, ["--since", "0"]), (plain, [])):
        run([coursed_bin(args), "export", "--database", district_db, "--output", path, "--force", *flags])
    imported_delta = timed([coursed_bin(args), "import", "--database", new_db("delta"), delta])
    imported_plain = timed([coursed_bin(args), "import", "--database", new_db("plain"), plain])
    return revisions, follow, imported_delta, imported_plain


class StreamLags(threading.Thread):
    """Reads the school's live stream from `after` on: for each create, the time it arrived less
    the district's `created_at` (when the district committed it), in ms."""

    def __init__(self, school, after):
        super().__init__(daemon=True)
        self.conn = http.client.HTTPConnection("127.0.0.1", school.port, timeout=60)
        self.conn.request("GET", "/v1/revisions/stream", headers={
            "Authorization": f"Bearer {TOKEN}", "Accept": "text/event-stream", "Last-Event-ID": str(after)})
        self.response = self.conn.getresponse()
        if self.response.status != 200:
            raise SystemExit(f"the school's stream answered {self.response.status}")
        self.lags, self.last = [], after

    def run(self):
        try:
            for raw in self.response:
                line = raw.decode()
                if line.startswith("id: "):
                    self.last = int(line[4:])
                elif line.startswith("data: "):
                    got = int(time.time() * 1000)
                    a = json.loads(line[6:])["attributes"]
                    if a["action"] == "create":
                        self.lags.append(got - ms(a["changes"]["created_at"]["after"]))
        except (OSError, ValueError):
            pass

    def stop(self):
        self.conn.sock and self.conn.sock.close()


def lag(args, engine, district_db, new_db, data_dir, out):
    """Lag of each create at the school, in ms, while the district takes --rate creates/s."""
    d = server(args, f"{engine}-district-lag", district_db)
    d.start(os.path.join(out, f"{engine}-district-lag.log"))
    school_db = new_db("school")
    s = server(args, f"{engine}-school", school_db, ["--follow", d.url(), "--follow-token", TOKEN])
    s.start(os.path.join(out, f"{engine}-school-lag.log"))
    try:
        # Caught up with what the district holds first.
        caught_up(s, feed_head(d), 300, f"{engine}: the school did not catch up")
        stream = StreamLags(s, feed_head(s))
        stream.start()
        argv = [os.path.join(args.target_dir, args.profile, "examples", "webhook_load"), coursed_bin(args),
                district_db, f"127.0.0.1:{d.port}", TOKEN, first_id(data_dir, "module_ids.txt"), "0",
                str(args.rate), str(args.seconds)]
        said = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        caught_up(s, feed_head(d), 120, f"{engine}: the school did not catch up after the load")
        school_head = feed_head(s)
        deadline = time.time() + 30
        while stream.last < school_head and time.time() < deadline:
            time.sleep(0.05)
        stream.stop()
        lags = sorted(stream.lags)
    finally:
        s.stop()
        d.stop()
    at = lambda q: lags[min(int(len(lags) * q), len(lags) - 1)] if lags else 0
    return said, len(lags), at(0.5), at(0.99), lags[-1] if lags else 0


def ms(text):
    from datetime import datetime, timezone
    t = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return int(t.timestamp() * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--profile", default="release")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")))
    args = ap.parse_args()
    work, out, data_dir, pristine = catalogue_100(args, "follow")

    def sqlite_new(name):
        path = os.path.join(work, f"{name}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        return path

    engines = []
    district_db = os.path.join(work, "district.db")
    engines.append(("sqlite", district_db, lambda: fresh_copy(pristine, district_db), sqlite_new))
    cluster = pg_pristine(args, work, pristine)
    if cluster:
        def pg_new(name):
            cluster.sql(f"DROP DATABASE IF EXISTS f_{name} WITH (FORCE)")
            cluster.sql(f"CREATE DATABASE f_{name}")
            return cluster.url(f"f_{name}")

        engines.append(("postgres", cluster.url("coursed_district"),
                        lambda: cluster.fresh("coursed_district", "coursed_pristine"), pg_new))
    missed = []
    lines = ["| engine | revisions | follow (HTTP + apply) | import of the delta (apply alone) | import of the "
             "catalogue (bulk, reference) | follow / bulk | lag at %d creates/s |" % args.rate,
             "|---|---:|---:|---:|---:|---:|---|"]
    try:
        for engine, database, prepare, new_db in engines:
            prepare()
            rounds = [catch_up(args, engine, database, new_db, work, out, rnd) for rnd in range(1, args.rounds + 1)]
            n = rounds[0][0]
            follow = statistics.median(r[1] for r in rounds)
            delta = statistics.median(r[2] for r in rounds)
            plain = statistics.median(r[3] for r in rounds)
            for r in rounds:
                log(f"   {engine:8} follow {r[0] / r[1]:8.0f}/s  delta import {r[0] / r[2]:8.0f}/s  "
                    f"bulk import {r[0] / r[3]:8.0f}/s")
            if n / follow < MIN_RATE:
                missed.append(f"{engine} catch-up")
            prepare()
            said, creates, p50, p99, worst = lag(args, engine, database, new_db, data_dir, out)
            log(f"   {engine}: {said}; {creates} creates followed, lag p50 {p50} ms p99 {p99} ms max {worst} ms")
            if p99 > MAX_LAG_P99_MS:
                missed.append(f"{engine} lag")
            lines.append(f"| {engine} | {n} | {n / follow:,.0f}/s ({follow:.1f} s) | {n / delta:,.0f}/s "
                         f"({delta:.1f} s) | {n / plain:,.0f}/s ({plain:.1f} s) | {plain / follow:.2f} | "
                         f"{creates} creates: p50 {p50} ms, p99 {p99} ms, max {worst} ms |")
    finally:
        if cluster:
            cluster.stop()
    print(f"\nCatching up: medians of {args.rounds} rounds; target >= {MIN_RATE} revisions/s. Lag target: p99 <= "
          f"{MAX_LAG_P99_MS} ms.\n")
    print("\n".join(lines))
    print("\nmissed: " + ", ".join(missed) if missed else "\nevery target met")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()

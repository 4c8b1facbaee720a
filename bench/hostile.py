#!/usr/bin/env python3
"""Hostile requests against coursed: requests a client can make that cost the server far more than
their kind usually does. Run it through bench/hostile.sh, which builds coursed first.

On a generated catalogue of 300 modules, 30,000 subjects and 150,000 chapters, served from SQLite
and (when PostgreSQL's server binaries are installed) from a throwaway PostgreSQL cluster:

1. each hostile request of hostile_cases.py and its benign twin (the same kind of request, of
   ordinary size), alternately, a few times each: median and max time, hostile / twin, status
   and size of the answer. A hostile request is not repeated once it timed out or took
   `--budget` seconds in all; after a timeout, or if the server died, the server is restarted
   on the same database and that is reported;
2. interference: `GET /healthz` and `GET /v1/subjects/{id}` polled back to back for
   `--quiet` seconds alone, then for `--attack` seconds while 8 processes loop the hostile
   requests: first those a read-only token can send (a student), then all of them;
3. the server's peak memory over the run: its private memory (RssAnon, sampled every 20 ms),
   which the target judges, and its resident set (VmRSS and VmHWM), which on SQLite also counts
   the pages of the database file it maps.

Reads are sent with a database token of scope `read` (`coursed token create --scope read`),
writes with a configured `--token`; the pollers use the configured token. The server trusts
127.0.0.1 as a proxy (`--trusted-proxy`), so that `X-Forwarded-For` is read. Targets, each
marked PASS or FAIL: no request over 1 s nor over 20 x its twin (per operation for the atomic
creates; a 5xx other than 503, or a timeout, fails); /healthz and the single GET keep p99 <= 50 ms
while 8 hostile clients run; the server's private memory <= 256 MiB. It exits 0 whatever the targets say: it
is a measurement. --smoke: a tiny catalogue, 32 KiB contents, a 64 KiB body limit, two
iterations, seconds of interference (a check that the script runs, which CI may run).
"""
import argparse
import json
import os
import subprocess
import time
from types import SimpleNamespace

import hostile_cases as cases
import pg
from bench import coursed_bin, fresh_copy, generate
from hostile_load import Client, Memory, attack, poll, series, summary
from hostile_report import report
from procs import cpu_ticks, machine_jiffies
from servers import Server, log, run
from workloads import CLK, TOKEN

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SEARCH_I = 900  # the iteration number of the modules stored for the search cases
SETTLE_S = 20  # how long the server may stay busy after the hostile clients stopped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny catalogue and payloads, a few iterations")
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    ap.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    ap.add_argument("--iterations", type=int, default=5, help="samples of each request (default 5)")
    ap.add_argument("--budget", type=float, default=20,
                    help="seconds a hostile request may take in all before it is not sent again")
    ap.add_argument("--timeout", type=float, default=60, help="seconds a request may take before it counts as a timeout")
    ap.add_argument("--quiet", type=float, default=5, help="seconds of the quiet baseline of the pollers")
    ap.add_argument("--attack", type=float, default=20, help="seconds of each hostile phase of the pollers")
    ap.add_argument("--clients", type=int, default=8, help="hostile clients in the interference phases")
    ap.add_argument("--only", help="run only the pairs whose name holds this text (and no interference)")
    ap.add_argument("--profile", default="release")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")))
    args = ap.parse_args()
    shape = (300, 100, 5)
    # A hostile module's content, what the search cases store (1 MiB of `&` would take about a
    # minute to search), the body limit.
    args.size, args.search_size, args.limit = 1 << 20, 256 << 10, 2 << 20
    if args.smoke:
        shape, args.size, args.search_size, args.limit = (5, 10, 2), 32 << 10, 16 << 10, 64 << 10
        args.iterations, args.quiet, args.attack = 2, 1, 2
    work = os.environ.get("BENCH_WORK", "/tmp/coursed-bench")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-hostile" + ("-smoke" if args.smoke else "")
    out = os.path.join(work, "results", stamp)
    os.makedirs(out, exist_ok=True)
    data_dir = os.path.join(work, "data-%d-%d-%d" % shape)
    os.makedirs(data_dir, exist_ok=True)
    pristine = os.path.join(data_dir, "coursed.db")
    generate(args, pristine, data_dir, *shape)

    engines = [] if args.no_sqlite else [("SQLite", lambda: sqlite_db(args, pristine, work), None)]
    cluster = None
    if not args.no_pg and not pg.bindir():
        log("no PostgreSQL server binaries (apt-get install postgresql): PostgreSQL is skipped")
    elif not args.no_pg:
        cluster = pg.Cluster(os.path.join(work, "pg-hostile"), log).start()
        cluster.sql("CREATE DATABASE coursed_pristine")
        run([coursed_bin(args), "copy", "--from", pristine, "--to", cluster.url("coursed_pristine")])
        cluster.sql("VACUUM ANALYZE", db="coursed_pristine")

        def pg_db():
            cluster.fresh("coursed_work", "coursed_pristine")
            return cluster.url("coursed_work")
        engines.append(("PostgreSQL", pg_db, cluster))
    results = {"meta": {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "shape": shape,
                        "cpus": os.cpu_count(), "args": {k: v for k, v in vars(args).items() if k != "target_dir"}},
               "engines": []}
    try:
        for name, make_db, _ in engines:
            results["engines"].append(measure(args, name, make_db(), data_dir, out))
    finally:
        if cluster:
            cluster.stop()
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    text = report(results)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    print(text, flush=True)
    log(f"results in {out}")


def sqlite_db(args, pristine, work):
    db = os.path.join(work, "hostile.db")
    fresh_copy(pristine, db)
    return db


class Coursed:
    """coursed on `db`, restarted on demand (same database); each start's log kept."""

    def __init__(self, args, name, db, out, memory):
        self.args, self.name, self.db, self.out, self.memory = args, name, db, out, memory
        self.starts, self.server = 0, None

    def start(self):
        self.starts += 1
        argv = [coursed_bin(self.args), "serve", "--port", "0", "--database", self.db, "--token", TOKEN,
                "--log-level", "warn", "--trusted-proxy", "127.0.0.1", "--body-limit", str(self.args.limit)]
        self.server = Server(f"coursed-{self.name}", argv, ready_line="listening on http://")
        self.server.start(os.path.join(self.out, f"{self.name}.{self.starts}.log"))
        self.port, self.memory.pid = self.server.port, self.server.proc.pid

    def alive(self):
        return self.server.proc.poll() is None

    def stop(self, kill=False):
        """Stops the server (SIGTERM; SIGKILL with `kill`, for a server still working on
        requests nobody waits for: a write cut short is rolled back on either engine)."""
        self.memory.high_water()
        self.memory.pid = None
        if kill and self.alive():
            self.server.proc.kill()
        self.server.stop()


def measure(args, engine, db, data_dir, out):
    log(f"== {engine}")
    busy0 = machine_jiffies()
    read_token = subprocess.run([coursed_bin(args), "token", "create", "--database", db, "--name", "student",
                                 "--scope", "read"], check=True, capture_output=True, text=True).stdout.strip()
    tokens = {"read": read_token, "write": TOKEN}
    memory = Memory()
    srv = Coursed(args, engine, db, out, memory)
    srv.start()
    notes, rows = [], []
    try:
        client = Client(srv.port, tokens, args.timeout)
        ctx = catalogue(client, args, data_dir)
        ctx.search_marker = lambda v: cases.marker(v, SEARCH_I)
        stored = store_for_search(client, args, ctx, notes)
        for pair in cases.pairs(ctx):
            if args.only and args.only not in pair.name:
                continue
            if pair.group == "search" and "excerpt" in pair.name and not stored.get(pair.name.rsplit(" ", 1)[1], True):
                notes.append(f"{pair.name}: its module was not stored, so the search finds nothing")
            memory.label = pair.name
            client = Client(srv.port, tokens, args.timeout)
            host, twin = series(client, pair, args.iterations, args.budget, srv.alive)
            client.close()
            row = {"group": pair.group, "name": pair.name, "hostile": summary(host), "twin": summary(twin),
                   "per_op": pair.per_op}
            rows.append(row)
            h = row["hostile"]
            log(f"   {pair.name[:60]:60} {h['median_ms']:10.1f} ms (max {h['max_ms']:.1f}) {h['status']:>7} "
                f"twin {row['twin']['median_ms']:8.1f} ms {row['twin']['status']}")
            restart(srv, pair.name, h["timeouts"] + row["twin"]["timeouts"], notes)
        phases = [] if args.only else interference(srv, tokens, ctx, args, notes, memory)
    finally:
        srv.stop()
        memory.close()
    busy1 = machine_jiffies()
    return {"engine": engine, "pairs": rows, "phases": phases, "notes": notes, "word": ctx.word,
            "word_total": ctx.word_total, "peak_rss_kib": memory.peak_rss_kib, "peak_anon_kib": memory.peak_anon_kib,
            "peak_at": memory.peak_at, "starts": srv.starts,
            "machine_busy_pct": round(100 * (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]))}


def restart(srv, what, timeouts, notes):
    """Restarts the server after a timeout (it may still be working on the request) or a death."""
    if not srv.alive():
        notes.append(f"the server exited with status {srv.server.proc.returncode} during '{what}' (see its log); restarted")
    elif timeouts:
        notes.append(f"'{what}' timed out; the server was killed and restarted so that it stops working on it")
    else:
        return
    srv.stop(kill=True)
    srv.start()


def get_json(client, path, token="read"):
    s = client.send("GET", path, None, (), token)
    if s.status != 200:
        raise SystemExit(f"GET {path}: {s.status}")
    return json.loads(client.last_body)


def catalogue(client, args, data_dir):
    """What the pairs need to know of the catalogue: ids, last pages, the commonest words."""
    ids = lambda name: [l.strip() for l in open(os.path.join(data_dir, name)) if l.strip()]
    ctx = SimpleNamespace(size=args.size, search_size=args.search_size, limit=args.limit, smoke=args.smoke,
                          subject_ids=ids("subject_ids.txt")[:1300], module_ids=ids("module_ids.txt"))
    client.keep_body = True
    total = lambda path: get_json(client, path)["meta"]["page"]["total"]
    last = lambda n: max(1, -(-n // 20))
    ctx.subjects_last = last(total("/v1/subjects"))
    ctx.chapters_last = last(total("/v1/chapters"))
    ctx.unavailable_last = last(total("/v1/subjects?filter%5Bavailable_for_courses%5D=false"))
    ctx.word, ctx.word_total = commonest(client, "chapters", total)
    ctx.word_last = last(ctx.word_total)
    ctx.word_mid = (ctx.word_last + 1) // 2
    ctx.subject_word, n = commonest(client, "subjects", total)
    ctx.subject_word_last = last(n)
    doc = cases.module_doc("<p>the module the PATCH cases rewrite</p>", 0)
    s = client.send("POST", "/v1/modules", doc, (("Content-Type", cases.JSONAPI),), "write")
    if s.status != 201:
        raise SystemExit(f"could not create the module to patch: {s.status}")
    ctx.patch_module = json.loads(client.last_body)["data"]["id"]
    client.keep_body = False
    log(f"   chapters: '{ctx.word}' in {ctx.word_total:,}; subjects: '{ctx.subject_word}' in {n:,}")
    return ctx


def commonest(client, kind, total):
    """The word of the catalogue's `kind` that most resources hold, and how many hold it: the
    words of a few pages of titles (and introductions), each counted by a search."""
    words = {}
    for page in (1, 2, 3):
        for r in get_json(client, f"/v1/{kind}?page%5Bsize%5D=100&page%5Bnumber%5D={page}")["data"]:
            text = (r["attributes"]["title"] + " " + r["attributes"].get("introduction", "")).lower()
            for w in "".join(c if c.isalnum() else " " for c in text).split():
                words[w] = words.get(w, 0) + 1
    candidates = sorted(words, key=words.get, reverse=True)[:12]
    counted = [(total(f"/v1/{kind}?filter%5Bsearch%5D={cases.q(w)}&page%5Bsize%5D=1"), w) for w in candidates]
    n, w = max(counted)
    return w, n


def store_for_search(client, args, ctx, notes):
    """A module of each hostile content (and one of prose), of `--search-size`, for the searches
    whose excerpts reach them. Returns which were stored."""
    slow = Client(client.port, client.tokens, args.timeout)
    stored = {}
    n = args.search_size
    for v in list(cases.VARIANTS) + ["words", "prose"]:
        content = cases.prose(n, SEARCH_I) if v == "prose" else cases.hostile_content(v, n, SEARCH_I)
        s = slow.send("POST", "/v1/modules", cases.module_doc(content, SEARCH_I), (("Content-Type", cases.JSONAPI),), "write")
        stored[v] = s.status == 201
        log(f"   stored the {v} module for search: {s.status} in {s.seconds:.1f} s")
        if not stored[v]:
            notes.append(f"storing the {v} module for search answered {s.status} after {s.seconds:.1f} s")
    slow.close()
    return stored


def interference(srv, tokens, ctx, args, notes, memory):
    """The pollers alone, then with `--clients` hostile clients: read-only ones, then all."""
    all_pairs = cases.pairs(ctx)
    build = lambda r: (r.method, r.path, r.body(0) if callable(r.body) else r.body, r.headers, r.token)
    mixes = [("read token, reads only", [build(p.hostile) for p in all_pairs if p.hostile.token == "read"]),
             ("every hostile request", [build(p.hostile) for p in all_pairs])]
    subject = ctx.subject_ids[len(ctx.subject_ids) // 2]
    phases = []
    for n, (label, requests) in enumerate(mixes):
        memory.label = f"interference: {label}"
        log(f"   interference, {label}: {args.quiet:.0f} s quiet, {args.attack:.0f} s with {args.clients} hostile clients")
        quiet = poll(srv.port, TOKEN, subject, args.quiet)
        b0 = machine_jiffies()
        during, done, timeouts = attack(srv.port, tokens, requests, args.clients, args.attack,
                                        lambda: poll(srv.port, TOKEN, subject, args.attack), args.timeout)
        b1 = machine_jiffies()
        settled = settle(srv, notes, label, restart=n + 1 < len(mixes), limit=SETTLE_S)
        phases.append({"label": label, "quiet": quiet, "during": during, "hostile_done": done,
                       "hostile_timeouts": timeouts, "settle_s": settled, "settle_limit_s": SETTLE_S,
                       "machine_busy_pct": round(100 * (b1[0] - b0[0]) / max(1, b1[1] - b0[1]))})
        log(f"     p99 of /healthz {during['healthz']['p99_ms']:.1f} ms, of a subject {during['subject']['p99_ms']:.1f} ms; "
            f"{done} hostile requests answered; idle again after {settled} s")
    return phases


def settle(srv, notes, label, restart, limit):
    """Seconds until the server is idle again (under a tenth of a core for half a second, and
    /healthz answered within 50 ms) after the hostile clients stopped; `None` when it is not
    within `limit` (then it is restarted, if `restart`)."""
    started = time.time()
    c = Client(srv.port, {}, 5)
    while time.time() - started < limit and srv.alive():
        t0 = cpu_ticks(srv.server.proc.pid)
        time.sleep(0.5)
        idle = (cpu_ticks(srv.server.proc.pid) - t0) / CLK < 0.05
        s = c.send("GET", "/healthz", None, (), None)
        if idle and s.status == 200 and s.seconds < 0.05:
            c.close()
            return round(time.time() - started, 1)
    c.close()
    notes.append(f"after '{label}' the server was still busy {limit} s later" + ("; killed and restarted" if restart else ""))
    if restart:
        srv.stop(kill=True)
        srv.start()
    return None


if __name__ == "__main__":
    main()

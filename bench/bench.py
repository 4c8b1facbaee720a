#!/usr/bin/env python3
"""coursed benchmark: W1-W5 against coursed, and (when the reference bench is present) against
the limit (a hand-tuned warp + rusqlite program serving only W1) and the peer (the same API on
django-rest-framework-json-api + gunicorn), all in one run, so that ratios are taken between
figures measured side by side on the same, noisy machine. When PostgreSQL's server binaries are
installed, coursed on PostgreSQL (and the peer on the same throwaway cluster) are measured in the
same rounds (see pg.py), and so is PostgreSQL alone writing W4's and W5's rows through pgbench,
with no HTTP server in front of it (see pgalone.py), and its SQLite twin: coursed's store writing
them with no HTTP server (see sqlitealone.py).

coursed also serves variants of those, measured on the same server right after the workload they
vary, for same-run ratios: W6 (W1 revalidated with If-None-Match, every answer a 304), W2z and W3z
(W2 and W3 with Accept-Encoding: gzip), and W1c (W1 with an Origin, on a second coursed started
with --cors-origin, right after the first).

Run it through bench/run.sh, which builds coursed and installs wrk first. Everything generated
goes under $BENCH_WORK (default /tmp/coursed-bench); results under $BENCH_WORK/results/<stamp>/.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import pg
from pgalone import PgAlone
from sqlitealone import SqliteAlone
from procs import memory_kib
from servers import Server, log, run
from workloads import BASE, CORS_ORIGIN, COURSED, COURSED_PG, TOKEN, first_id, workload_env, wrk

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# ---------- data ----------

def coursed_bin(args):
    return os.path.join(args.target_dir, args.profile, "coursed")


def maker_bin(args):
    """The binary that makes the data: the other revision's when comparing with one (--baseline),
    since a database of a newer schema is refused by an older coursed, and a newer one migrates
    an older database when it opens it."""
    return getattr(args, "baseline", None) or coursed_bin(args)


def generate(args, path, ids_dir, modules, per_module, chapters):
    if os.path.exists(path) and os.path.exists(os.path.join(ids_dir, "subject_ids.txt")):
        return
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    run([maker_bin(args), "generate", "--database", path, "--modules", str(modules),
         "--subjects-per-module", str(per_module), "--chapters-per-subject", str(chapters), "--ids-dir", ids_dir])


def catalogue_100(args, name):
    """The work folder of benchmark `name` and a pristine catalogue of 100 modules, 10,000
    subjects and 50,000 chapters in it (made once); returns (work, results, data_dir, pristine).
    """
    args.baseline = None
    work = os.path.join(os.environ.get("BENCH_WORK", "/tmp/coursed-bench"), name)
    out = os.path.join(work, "results")
    data_dir = os.path.join(work, "data-100-100-5")
    os.makedirs(out, exist_ok=True)
    os.makedirs(data_dir, exist_ok=True)
    pristine = os.path.join(data_dir, "coursed.db")
    generate(args, pristine, data_dir, 100, 100, 5)
    return work, out, data_dir, pristine


def pg_pristine(args, work, pristine):
    """A throwaway PostgreSQL cluster holding `pristine` as the database coursed_pristine, or
    None without PostgreSQL's server binaries (or with --no-pg)."""
    if args.no_pg:
        return None
    if not pg.bindir():
        log("no PostgreSQL server binaries: SQLite only")
        return None
    cluster = pg.Cluster(os.path.join(work, "pg"), log).start()
    cluster.sql("CREATE DATABASE coursed_pristine")
    run([coursed_bin(args), "copy", "--from", pristine, "--to", cluster.url("coursed_pristine")])
    cluster.sql("VACUUM ANALYZE", db="coursed_pristine")
    return cluster


def fresh_copy(pristine, path):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    shutil.copyfile(pristine, path)


def coursed_server(args, db, name="coursed", flags=(), workloads=BASE, prepare=None, binary=None):
    argv = [binary or coursed_bin(args), "serve", "--port", "0", "--database", db, "--token", TOKEN, "--log-level", "warn"]
    return Server(name, argv + list(flags), ready_line="listening on http://", workloads=workloads, prepare=prepare)


# ---------- the run ----------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="tiny dataset, 1 s per workload, coursed only")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-peers", action="store_true", help="measure coursed only")
    ap.add_argument("--no-scale", action="store_true", help="skip the 1,000,000-subject database")
    ap.add_argument("--no-pg", action="store_true", help="skip the servers on PostgreSQL")
    ap.add_argument("--servers", help="only these servers, comma-separated (e.g. coursed-pg,peer-pg)")
    ap.add_argument("--workloads", help="only these workloads, comma-separated (e.g. W4,W5)")
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--warmup", default="3s")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--idle-wait", type=int, default=60, help="wait up to N s for a quiet machine before each workload")
    ap.add_argument("--profile", default="release")
    ap.add_argument("--baseline", help="a coursed binary of another revision: W1-W5 on it too, right before coursed "
                                       "on each engine, for before/after ratios in the same run")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")))
    ap.add_argument("--shared", default=os.environ.get("BENCH_SHARED", os.path.join(REPO, "..", "shared", "bench")))
    args = ap.parse_args()
    if args.smoke:
        args.duration, args.warmup, args.rounds, args.idle_wait = "1s", "1s", 1, 0
        args.no_peers = args.no_scale = True
    work = os.environ.get("BENCH_WORK", "/tmp/coursed-bench")
    out = os.path.join(work, "results", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + ("-smoke" if args.smoke else ""))
    os.makedirs(out, exist_ok=True)
    peers = not args.no_peers and os.path.isdir(args.shared)
    if not args.no_peers and not peers:
        log(f"no reference bench at {args.shared}: measuring coursed only")

    # The dataset: the reference one when the peers run (same rows for everybody), else generated.
    if peers:
        run(["bash", os.path.join(args.shared, "setup.sh")])
        data_dir = os.environ.get("BENCH_DATA", "/tmp/bench-data")
        pristine = os.path.join(work, "reference.db")
        if not os.path.exists(pristine):
            run([maker_bin(args), "load", "--database", pristine, os.path.join(data_dir, "dataset.json")])
    else:
        shape = (5, 10, 2) if args.smoke else (100, 100, 5)
        data_dir = os.path.join(work, "data-%d-%d-%d" % shape)
        pristine = os.path.join(data_dir, "coursed.db")
        os.makedirs(data_dir, exist_ok=True)
        generate(args, pristine, data_dir, *shape)

    run_db = os.path.join(work, "run.db")
    fresh = lambda: fresh_copy(pristine, run_db)
    servers = []
    if args.baseline:
        servers.append(lambda: coursed_server(args, run_db, name="coursed-before", workloads=BASE, prepare=fresh,
                                              binary=args.baseline))
    servers += [
        lambda: coursed_server(args, run_db, workloads=COURSED, prepare=fresh),
        # Right after coursed, on a fresh copy of the same database, so that W1c / W1 is a same-run ratio.
        lambda: coursed_server(args, run_db, name="coursed-cors", flags=["--cors-origin", CORS_ORIGIN],
                               workloads=["W1c"], prepare=fresh),
        # coursed's storage alone writing W4's and W5's rows (no HTTP), on a fresh copy.
        lambda: SqliteAlone(os.path.join(args.target_dir, args.profile, "examples", "store_alone"), run_db, fresh),
    ]
    cluster = None
    if not args.no_pg and not pg.bindir():
        log("no PostgreSQL server binaries (apt-get install postgresql): the PostgreSQL servers are skipped")
    elif not args.no_pg:
        cluster = pg.Cluster(os.path.join(work, "pg"), log).start()
        try:
            servers += pg_servers(args, cluster, pristine, peers)
        except BaseException:
            cluster.stop()
            raise
    if peers:
        limit_bin = os.path.join(os.environ.get("CARGO_TARGET_DIR_LIMIT", "/tmp/limit-target"), "release", "bench-limit")
        servers.append(lambda: Server("limit", [limit_bin, "--port", "8102", "--db", os.path.join(data_dir, "course.sqlite3")],
                                      port=8102, workloads=["W1"]))
        servers.append(lambda: Server("peer", ["bash", os.path.join(args.shared, "peers", "drf", "run.sh"), "8101"], port=8101))

    results = {"meta": meta(args), "rounds": [], "memory": [], "scale": None}
    try:
        measure(args, servers, results, work, out, data_dir)
    finally:
        if cluster:
            cluster.stop()
    finish(args, results, out)


def measure(args, servers, results, work, out, data_dir):
    for rnd in range(1, args.rounds + 1):
        for make in servers:
            s = make()
            if args.servers and s.name not in args.servers.split(","):
                continue
            if args.workloads:
                s.workloads = [w for w in s.workloads if w in args.workloads.split(",")]
            if not s.workloads:
                continue
            if s.prepare:
                s.prepare()
            log(f"== round {rnd}: {s.name}")
            probe = "/v1/subjects/" + first_id(data_dir, "subject_ids.txt")
            try:
                s.start(os.path.join(out, f"{s.name}.r{rnd}.log"), probe)
                for w in s.workloads:
                    tag = f"{s.name}.r{rnd}"
                    if isinstance(s, (PgAlone, SqliteAlone)):
                        r = s.measure(w, args, out, tag)
                    else:
                        r = wrk(s, w, args, data_dir, out, tag, workload_env(s, w, data_dir, out, tag))
                    r.update(round=rnd, server=s.name, workload=w)
                    results["rounds"].append(r)
                    db = f" + db {r['db_cpu_us_per_req']} us" if r["db_cpu_us_per_req"] is not None else ""
                    ms = lambda k: "      -" if r[k] is None else f"{r[k]:7.2f}"
                    log(f"   {w:3} {r['rps']:10.1f} req/s  p50 {ms('p50_ms')} ms  p99 {ms('p99_ms')} ms  "
                        f"non-{r['expect']} {r['non2xx']}  cpu/req {r['cpu_us_per_req']} us{db}  "
                        f"{r['bytes_per_req']} B/req  busy {r['machine_busy_pct']}%")
                if s.proc:
                    hwm, anon = memory_kib(s.proc.pid)
                    results["memory"].append({"round": rnd, "server": s.name, "vmhwm_kib": hwm, "rss_anon_kib": anon})
            finally:
                s.stop()

    if not args.no_scale:
        results["scale"] = scale(args, work, out)


def finish(args, results, out):
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    report = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), os.path.join(out, "results.json")],
                            capture_output=True, text=True)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(report.stdout)
    print(report.stdout)
    log(f"results in {out}")
    bad = [r for r in results["rounds"] if r["non2xx"] or r["socket_errors"]]
    if bad:
        raise SystemExit(f"{len(bad)} runs had responses with an unexpected status (non-2xx; non-304 for W6) "
                         "or socket errors")
    if args.smoke:
        return
    sys.exit(report.returncode)


def pg_servers(args, cluster, pristine, peers):
    """coursed on PostgreSQL (and the peer on the same cluster): the dataset copied once into a
    pristine database, each start on a fresh copy of it, so that writes do not carry over."""
    cluster.sql("CREATE DATABASE coursed_pristine")
    run([maker_bin(args), "copy", "--from", pristine, "--to", cluster.url("coursed_pristine")])
    cluster.sql("VACUUM ANALYZE", db="coursed_pristine")

    def coursed_pg():
        argv = [coursed_bin(args), "serve", "--port", "0", "--database", cluster.url("coursed_work"),
                "--token", TOKEN, "--log-level", "warn"]
        return Server("coursed-pg", argv, ready_line="listening on http://",
                      workloads=COURSED_PG, prepare=lambda: cluster.fresh("coursed_work", "coursed_pristine"),
                      db_ticks=cluster.cpu_ticks)
    made = [coursed_pg]
    if args.baseline:
        def before_pg():
            argv = [args.baseline, "serve", "--port", "0", "--database", cluster.url("coursed_work"),
                    "--token", TOKEN, "--log-level", "warn"]
            return Server("coursed-before-pg", argv, ready_line="listening on http://", workloads=BASE,
                          prepare=lambda: cluster.fresh("coursed_work", "coursed_pristine"), db_ticks=cluster.cpu_ticks)
        made.insert(0, before_pg)
    # pg-alone's tables are made only when it runs.
    if not args.servers or "pg-alone" in args.servers.split(","):
        if os.path.exists(os.path.join(cluster.bin, "pgbench")):
            sizes = PgAlone.setup(cluster, "coursed_pristine")
            made.append(lambda: PgAlone(cluster, sizes))
        else:
            log("no pgbench beside PostgreSQL's server binaries: pg-alone (what PostgreSQL writes by itself) is skipped")
    if peers:
        env = {"DRF_PG": cluster.admin_url()}
        run(["bash", os.path.join(args.shared, "peers", "drf", "setup.sh")], env={**os.environ, **env})
        made.append(lambda: Server("peer-pg", ["bash", os.path.join(args.shared, "peers", "drf", "run.sh"), "8103"],
                                   port=8103, env=env, db_ticks=cluster.cpu_ticks))
    return made


def scale(args, work, out):
    """W1 and W2 on a generated 10,000- and a 1,000,000-subject database, and start-up time."""
    small_dir, big_dir = os.path.join(work, "scale-10k"), os.path.join(work, "scale-1m")
    for d in (small_dir, big_dir):
        os.makedirs(d, exist_ok=True)
    generate(args, os.path.join(small_dir, "coursed.db"), small_dir, 100, 100, 2)
    generate(args, os.path.join(big_dir, "coursed.db"), big_dir, 10000, 100, 2)
    res = {"runs": []}
    for rnd in range(1, args.rounds + 1):
        for label, d in (("10k", small_dir), ("1m", big_dir)):
            s = coursed_server(args, os.path.join(d, "coursed.db"), name=f"coursed-{label}")
            log(f"== scale round {rnd}: {label}")
            try:
                s.start(os.path.join(out, f"scale-{label}.r{rnd}.log"))
                for w in ("W1", "W2"):
                    r = wrk(s, w, args, d, out, f"scale-{label}.r{rnd}")
                    r.update(round=rnd, size=label, workload=w)
                    res["runs"].append(r)
                    log(f"   {w} {r['rps']:10.1f} req/s  p50 {r['p50_ms']:7.2f} ms  non-2xx {r['non2xx']}")
            finally:
                s.stop()
    ready = []
    for _ in range(5):
        s = coursed_server(args, os.path.join(big_dir, "coursed.db"), name="coursed-ready")
        s.start(os.path.join(out, "scale-ready.log"))
        ready.append(s.ready_ms)
        s.stop()
    res["ready_ms"] = ready
    log(f"   ready on the 1,000,000-subject file in {statistics.median(ready):.0f} ms (median of 5)")
    return res


def meta(args):
    def cmd(c):
        try:
            return subprocess.run(c, capture_output=True, text=True, shell=True).stdout.strip().splitlines()[0]
        except Exception:
            return "?"
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "host": cmd("uname -srm"), "cpus": os.cpu_count(),
        "cpu": cmd("awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo"),
        "wrk": cmd("wrk -v 2>&1"), "rustc": cmd("rustc --version"),
        "coursed": cmd(f"{coursed_bin(args)} --version"),
        "settings": f"wrk -t1 -c{args.connections}, warm-up {args.warmup}, measured {args.duration}, rounds {args.rounds}",
    }


if __name__ == "__main__":
    main()

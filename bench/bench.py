#!/usr/bin/env python3
"""coursed benchmark: W1-W5 against coursed, and (when the reference bench is present) against
the limit (a hand-tuned warp + rusqlite program serving only W1) and the peer (the same API on
django-rest-framework-json-api + gunicorn), all in one run, so that ratios are taken between
figures measured side by side on the same, noisy machine. When PostgreSQL's server binaries are
installed, coursed on PostgreSQL (and the peer on the same throwaway cluster) are measured in the
same rounds (see pg.py).

coursed also serves variants of those, measured on the same server right after the workload they
vary, for same-run ratios: W6 (W1 revalidated with If-None-Match, every answer a 304), W2z and W3z
(W2 and W3 with Accept-Encoding: gzip), and W1c (W1 with an Origin, on a second coursed started
with --cors-origin, right after the first).

Run it through bench/run.sh, which builds coursed and installs wrk first. Everything generated
goes under $BENCH_WORK (default /tmp/coursed-bench); results under $BENCH_WORK/results/<stamp>/.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import namedtuple

import pg
from procs import cpu_ticks, tree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TOKEN = "bench-token"
CORS_ORIGIN = "http://bench.example"
# A workload: its wrk script, what it asks, extra request headers (common.lua's BENCH_HEADERS), the
# status every answer must have (any other counts as a failure), `check`: (path, response header,
# value) asked once before the run, so that a variant the server does not honour (no --cors-origin,
# --compression off) fails instead of quietly measuring plain W1/W2/W3, and `etags`: the run needs
# every subject's current tag (BENCH_ETAGS).
Workload = namedtuple("Workload", "script what headers expect check etags", defaults=((), "2xx", None, False))
GZIP = ("Accept-Encoding: gzip",)
WORKLOADS = {
    "W1": Workload("w1_get_subject.lua", "GET /v1/subjects/{id}"),
    "W2": Workload("w2_list_subjects.lua", "GET /v1/subjects?page[size]=20&page[number]=1..500"),
    "W3": Workload("w3_module_subjects.lua", "GET /v1/modules/{id}/subjects?page[size]=100"),
    "W4": Workload("w4_create_subject.lua", "POST /v1/subjects"),
    "W5": Workload("w5_patch_subject.lua", "PATCH /v1/subjects/{id} (title)"),
    "W6": Workload("w6_get_subject_if_none_match.lua", "GET /v1/subjects/{id}, If-None-Match: its tag (304)",
                   expect="304", etags=True),
    "W1c": Workload("w1_get_subject.lua", f"GET /v1/subjects/{{id}}, Origin: {CORS_ORIGIN}",
                    headers=(f"Origin: {CORS_ORIGIN}",),
                    check=("/v1/subjects/{subject}", "Access-Control-Allow-Origin", CORS_ORIGIN)),
    "W2z": Workload("w2_list_subjects.lua", "W2, Accept-Encoding: gzip", headers=GZIP,
                    check=("/v1/subjects?page%5Bsize%5D=20", "Content-Encoding", "gzip")),
    "W3z": Workload("w3_module_subjects.lua", "W3, Accept-Encoding: gzip", headers=GZIP,
                    check=("/v1/modules/{module}/subjects?page%5Bsize%5D=100", "Content-Encoding", "gzip")),
}
# What every server serves (the limit: W1 only).
BASE = ["W1", "W2", "W3", "W4", "W5"]
# coursed adds the variants, each right after the workload it varies. W6 also comes before W4 and
# W5, which change tags, though its tags are fetched just before it anyway.
COURSED = ["W1", "W6", "W2", "W2z", "W3", "W3z", "W4", "W5"]
COURSED_PG = ["W1", "W6", "W2", "W3", "W4", "W5"]
CLK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, **kw):
    log("$", " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


# ---------- process measurements ----------

def memory_kib(pid):
    """(VmHWM summed, RssAnon summed) over the process tree, in KiB."""
    hwm = anon = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm += int(line.split()[1])
                    elif line.startswith("RssAnon:"):
                        anon += int(line.split()[1])
        except OSError:
            pass
    return hwm, anon


def machine_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy, busy + v[3] + v[4]


def wait_quiet(limit_s, pct=10):
    """Waits (at most limit_s) for 3 consecutive seconds under pct % busy."""
    quiet, t0 = 0, time.time()
    while time.time() - t0 < limit_s:
        b0, t_0 = machine_jiffies()
        time.sleep(1)
        b1, t_1 = machine_jiffies()
        quiet = quiet + 1 if 100 * (b1 - b0) / max(1, t_1 - t_0) < pct else 0
        if quiet >= 3:
            return


# ---------- servers ----------

class Server:
    def __init__(self, name, argv, port=None, env=None, ready_line=None, workloads=BASE, prepare=None,
                 db_ticks=None):
        self.name, self.argv, self.port, self.env = name, argv, port, env
        self.ready_line, self.workloads = ready_line, list(workloads)
        self.proc = None
        self.ready_ms = None
        # Called before each start (a fresh copy of the database), and the CPU of a database
        # server that is not a child of this one (PostgreSQL).
        self.prepare, self.db_ticks = prepare, db_ticks

    def start(self, logfile, probe=None):
        self.log = open(logfile, "w")
        t0 = time.perf_counter()
        if self.ready_line:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                         env={**os.environ, **(self.env or {})})
            for line in self.proc.stdout:
                if self.ready_line in line:
                    self.ready_ms = (time.perf_counter() - t0) * 1000
                    self.port = int(line.strip().rsplit(":", 1)[1].split("/")[0])
                    break
            else:
                raise SystemExit(f"{self.name} exited before it was ready (see {logfile})")
        else:
            if port_in_use(self.port):
                raise SystemExit(f"port {self.port} is already in use: stop what listens there first")
            self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log,
                                         env={**os.environ, **(self.env or {})})
            wait_http(self, logfile, probe)
        return self

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def port_in_use(port):
    import socket
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_http(server, logfile, probe):
    """Waits until `probe` (a path every server serves) answers 200."""
    import urllib.request
    for _ in range(300):
        if server.proc.poll() is not None:
            raise SystemExit(f"{server.name} exited during start-up (see {logfile})")
        try:
            req = urllib.request.Request(server.url() + probe,
                                         headers={"Authorization": "Bearer " + TOKEN})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.1)
    raise SystemExit(f"{server.name} did not answer within 30 s (see {logfile})")


# ---------- load ----------

def first_id(data_dir, name):
    with open(os.path.join(data_dir, name)) as f:
        return f.readline().strip()


def http_get(conn, path, headers=None):
    """GET over an open keep-alive connection; the body is read to the end so that the connection
    can be reused. http.client sends Accept-Encoding: identity unless `headers` has one."""
    conn.request("GET", path, headers={"Authorization": "Bearer " + TOKEN, "Accept": "application/vnd.api+json",
                                       **(headers or {})})
    r = conn.getresponse()
    r.read()
    return r


def confirm(server, w, data_dir):
    """One request with the variant's headers must get the response header the variant is about."""
    path, header, value = WORKLOADS[w].check
    path = path.format(subject=first_id(data_dir, "subject_ids.txt"), module=first_id(data_dir, "module_ids.txt"))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        r = http_get(conn, path, dict(h.split(": ", 1) for h in WORKLOADS[w].headers))
    finally:
        conn.close()
    if r.status != 200 or r.getheader(header) != value:
        raise SystemExit(f"{server.name} does not honour {w}: GET {path} answered {r.status} with "
                         f"{header}: {r.getheader(header)!r}, not {value!r}")


def fetch_etags(server, data_dir, path):
    """Every subject's current tag as "id tag" lines in `path` (W6's BENCH_ETAGS), over one keep-alive
    connection. Asked of the running server just before W6: writes change tags, and each server
    (each engine, each round's fresh database) is asked for its own."""
    with open(os.path.join(data_dir, "subject_ids.txt")) as f:
        ids = [line.strip() for line in f if line.strip()]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    lines = []
    try:
        for i in ids:
            r = http_get(conn, f"/v1/subjects/{i}")
            if r.status != 200 or not r.getheader("ETag"):
                raise SystemExit(f"{server.name}: GET /v1/subjects/{i} answered {r.status}, ETag {r.getheader('ETag')!r}")
            lines.append(f"{i} {r.getheader('ETag')}\n")
    finally:
        conn.close()
    with open(path, "w") as f:
        f.writelines(lines)


def workload_env(server, w, data_dir, out_dir, tag):
    """What a workload needs from the running server before it starts, as wrk's environment."""
    if WORKLOADS[w].check:
        confirm(server, w, data_dir)
    if not WORKLOADS[w].etags:
        return {}
    path = os.path.join(out_dir, f"{tag}_{w}_etags.txt")
    fetch_etags(server, data_dir, path)
    return {"BENCH_ETAGS": path}


def wrk(server, w, args, data_dir, out_dir, tag, more_env=None):
    wl = WORKLOADS[w]
    script = os.path.join(HERE, "load", wl.script)
    env = {**os.environ, "BENCH_DATA": data_dir, "BENCH_TOKEN": TOKEN, "BENCH_HEADERS": "|".join(wl.headers),
           "BENCH_EXPECT_STATUS": wl.expect, **(more_env or {})}
    base = ["wrk", "-t1", f"-c{args.connections}", "--timeout", "30s", "-s", script, server.url()]
    if args.idle_wait:
        wait_quiet(args.idle_wait)
    subprocess.run(base[:2] + [f"-d{args.warmup}"] + base[2:], env=env, check=True, capture_output=True)
    db = server.db_ticks or (lambda: 0)
    c0, d0, (m0, t0) = cpu_ticks(server.proc.pid), db(), machine_jiffies()
    out = subprocess.run(base[:2] + [f"-d{args.duration}"] + base[2:], env=env, check=True,
                         capture_output=True, text=True).stdout
    c1, d1, (m1, t1) = cpu_ticks(server.proc.pid), db(), machine_jiffies()
    with open(os.path.join(out_dir, f"{tag}_{w}.txt"), "w") as f:
        f.write(out)
    line = next((l for l in out.splitlines() if l.startswith("RESULT")), None)
    if not line:
        raise SystemExit(f"wrk printed no RESULT line for {w}:\n{out}")
    r = dict(kv.split("=", 1) for kv in line.split()[1:])
    reqs = int(r["requests"])
    server_ticks = c1 - c0
    return {
        "rps": float(r["rps"]), "p50_ms": int(r["p50_us"]) / 1000, "p99_ms": int(r["p99_us"]) / 1000,
        # non2xx: answers with another status than the workload's expected one (2xx; 304 for W6).
        "non2xx": int(r["non2xx"]), "last_non2xx": int(r["last_non2xx"]), "expect": wl.expect,
        # What wrk read (status lines, headers and bodies): what compression saves.
        "bytes": int(r["bytes"]), "bytes_per_req": round(int(r["bytes"]) / reqs) if reqs else None,
        "socket_errors": sum(int(r[k]) for k in ("connect_errors", "read_errors", "write_errors", "timeouts")),
        "cpu_us_per_req": round(server_ticks * 1e6 / CLK / reqs) if reqs else None,
        "db_cpu_us_per_req": round((d1 - d0) * 1e6 / CLK / reqs) if reqs and server.db_ticks else None,
        "machine_busy_pct": round(100 * (m1 - m0) / max(1, t1 - t0)),
    }


# ---------- data ----------

def coursed_bin(args):
    return os.path.join(args.target_dir, args.profile, "coursed")


def generate(args, path, ids_dir, modules, per_module, chapters):
    if os.path.exists(path) and os.path.exists(os.path.join(ids_dir, "subject_ids.txt")):
        return
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    run([coursed_bin(args), "generate", "--database", path, "--modules", str(modules),
         "--subjects-per-module", str(per_module), "--chapters-per-subject", str(chapters), "--ids-dir", ids_dir])


def fresh_copy(pristine, path):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    shutil.copyfile(pristine, path)


def coursed_server(args, db, name="coursed", flags=(), workloads=BASE, prepare=None):
    argv = [coursed_bin(args), "serve", "--port", "0", "--database", db, "--token", TOKEN, "--log-level", "warn"]
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
            run([coursed_bin(args), "load", "--database", pristine, os.path.join(data_dir, "dataset.json")])
    else:
        shape = (5, 10, 2) if args.smoke else (100, 100, 5)
        data_dir = os.path.join(work, "data-%d-%d-%d" % shape)
        pristine = os.path.join(data_dir, "coursed.db")
        os.makedirs(data_dir, exist_ok=True)
        generate(args, pristine, data_dir, *shape)

    run_db = os.path.join(work, "run.db")
    fresh = lambda: fresh_copy(pristine, run_db)
    servers = [
        lambda: coursed_server(args, run_db, workloads=COURSED, prepare=fresh),
        # Right after coursed, on a fresh copy of the same database, so that W1c / W1 is a same-run ratio.
        lambda: coursed_server(args, run_db, name="coursed-cors", flags=["--cors-origin", CORS_ORIGIN],
                               workloads=["W1c"], prepare=fresh),
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
                    r = wrk(s, w, args, data_dir, out, tag, workload_env(s, w, data_dir, out, tag))
                    r.update(round=rnd, server=s.name, workload=w)
                    results["rounds"].append(r)
                    db = f" + db {r['db_cpu_us_per_req']} us" if r["db_cpu_us_per_req"] is not None else ""
                    log(f"   {w:3} {r['rps']:10.1f} req/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  "
                        f"non-{r['expect']} {r['non2xx']}  cpu/req {r['cpu_us_per_req']} us{db}  "
                        f"{r['bytes_per_req']} B/req  busy {r['machine_busy_pct']}%")
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
    run([coursed_bin(args), "copy", "--from", pristine, "--to", cluster.url("coursed_pristine")])
    cluster.sql("VACUUM ANALYZE", db="coursed_pristine")

    def coursed_pg():
        argv = [coursed_bin(args), "serve", "--port", "0", "--database", cluster.url("coursed_work"),
                "--token", TOKEN, "--log-level", "warn"]
        return Server("coursed-pg", argv, ready_line="listening on http://",
                      workloads=COURSED_PG, prepare=lambda: cluster.fresh("coursed_work", "coursed_pristine"),
                      db_ticks=cluster.cpu_ticks)
    made = [coursed_pg]
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

"""PostgreSQL alone, before and after: the statements two revisions of coursed send for W1, W4 and
W5, replayed by pgbench straight to each revision's own schema, with no HTTP, no JSON and no
coursed. It tells how much of a change in coursed's W1-W5 on PostgreSQL is the database doing
more work (a column read from another table, an index kept on every write), which no code
outside the database can take back.

    python3 bench/pgstatements.py --before BIN --now BIN [--data SQLITE_FILE] [--rounds 3] [--seconds 8]

bench/before-after.sh runs it after W1-W5 when PostgreSQL is there.

Each revision copies the same SQLite catalogue (made by the older revision) into a database of
its own on one throwaway cluster (`BIN copy`), then serves it once with every statement logged
while one request of each workload is sent: W1 `GET /v1/subjects/{id}`, W4 `POST /v1/subjects`,
W5 `PATCH /v1/subjects/{id}` of the title. Those statements, with the values they were sent,
become one pgbench script per workload and revision (the new subject's id is a fresh UUID at each
run, the patched title a random one). The rounds alternate the revisions; pgbench runs one client
with prepared statements. Latency is pgbench's average; `db µs` is the cluster's CPU per request.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pg import Cluster  # noqa: E402
from workloads import CLK  # noqa: E402

TOKEN = "statements-token"
TITLE = "Storage alone title"
WORKLOADS = ["W1", "W4", "W5"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def request(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={
        "Authorization": "Bearer " + TOKEN, "Accept": "application/vnd.api+json",
        "Content-Type": "application/vnd.api+json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def serve(binary, url, logfile):
    """Starts `binary` on `url`; returns (process, base URL) once it says where it listens."""
    out = open(logfile, "w")
    proc = subprocess.Popen([binary, "serve", "--port", "0", "--database", url, "--token", TOKEN,
                             "--log-level", "info"], stdout=subprocess.PIPE, stderr=out, text=True)
    deadline = time.time() + 120
    for line in proc.stdout:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return proc, m.group(1).rstrip("/")  # the API root, e.g. http://127.0.0.1:PORT/v1
        if time.time() > deadline:
            break
    proc.kill()
    raise SystemExit(f"{binary} did not start (see {logfile})")


def statements(server_log, marker, key):
    """The statements of the request sent after `marker`, in order, each with its parameters:
    [(sql, {n: literal})]. The request's are those of the backend that ran the first statement
    holding `key` (a pool's other connections and background work are left out). A backend
    logs a statement as it finishes it, which may be just after the client has its answer: the
    log is read again until that statement is there (10 s at most)."""
    deadline = time.time() + 10
    while True:
        found = logged(server_log, marker, key)
        if found is not None or time.time() > deadline:
            break
        time.sleep(0.05)
    if found is None:
        raise SystemExit(f"no statement holding {key!r} after {marker!r} in {server_log}")
    return found


def logged(server_log, marker, key):
    """[`statements`] as the log holds them now; None when no statement holds `key` yet."""
    with open(server_log, errors="replace") as f:
        text = f.read()
    entries = []  # (pid, sql, params)
    # The entry the last LOG line began, if it began one: a statement's further lines belong to
    # it, never to an earlier entry (a parse or bind line of another backend begins none).
    current = None
    for line in text[text.rindex(marker):].splitlines()[1:]:
        m = re.match(r".*?\[(\d+)\] (LOG|DETAIL|CONTEXT|STATEMENT):\s+(.*)", line)
        if not m:
            if current is not None and line[:1].isspace():
                current[1].append(line.strip())
            continue
        pid, kind, rest = m.groups()
        if kind == "LOG":
            s = re.match(r"duration: [\d.]+ ms\s+(?:statement|execute [^:]*): (.*)", rest)
            current = (pid, [s.group(1)], {}) if s else None
            if current is not None:
                entries.append(current)
        else:
            current = None
            if kind == "DETAIL" and entries and entries[-1][0] == pid:
                for n, v in re.findall(r"\$(\d+) = (NULL|'(?:[^']|'')*')", rest):
                    entries[-1][2][int(n)] = v
    pid = next((p for p, sql, _ in entries if key in " ".join(sql)), None)
    if pid is None:
        return None
    return [(" ".join(sql), params) for p, sql, params in entries if p == pid]


def script(stmts, substitute):
    """A pgbench script of `stmts` with their parameters as literals (`substitute` may replace one)."""
    lines = ["\\set r random(1, 1000000000)"]
    for sql, params in stmts:
        def value(m):
            n = int(m.group(1))
            v = params.get(n, "NULL")
            return substitute(v) or v

        lines.append(re.sub(r"\$(\d+)\b", value, sql) + ";")
    return "\n".join(lines) + "\n"


def capture(cluster, binary, db, work, subject, module):
    """The pgbench scripts of W1, W4 and W5 for the revision `binary` on database `db`."""
    cluster.sql(f"ALTER DATABASE {db} SET log_min_duration_statement = 0")
    server_log = os.path.join(cluster.data, "server.log")
    proc, base = serve(binary, cluster.url(db), os.path.join(work, f"{db}.log"))
    scripts = {}
    try:
        def mark(w):
            m = f"coursed-marker {db} {w} {time.time()}"
            cluster.sql(f"SELECT '{m}'", db=db)
            return m

        m = mark("W1")
        request(base, "GET", f"/subjects/{subject}")
        scripts["W1"] = script(statements(server_log, m, "FROM subjects WHERE id"), lambda v: None)
        m = mark("W4")
        created = request(base, "POST", "/subjects", {"data": {
            "type": "subjects", "attributes": {"title": TITLE, "introduction": "An introduction of a few words",
                                               "content": "<p>Some content of a subject</p>",
                                               "available_for_courses": True},
            "relationships": {"module": {"data": {"type": "modules", "id": module}}}}})
        new_id = created["data"]["id"]
        scripts["W4"] = script(statements(server_log, m, "INSERT INTO subjects"),
                               lambda v: "gen_random_uuid()::text" if v == f"'{new_id}'" else None)
        m = mark("W5")
        request(base, "PATCH", f"/subjects/{subject}",
                {"data": {"type": "subjects", "id": subject, "attributes": {"title": TITLE}}})
        words = TITLE.lower()
        scripts["W5"] = script(statements(server_log, m, "UPDATE subjects"), lambda v: (
            f"('{TITLE} ' || :r)" if v == f"'{TITLE}'" else f"('{words} ' || :r)" if v == f"'{words}'" else None))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        cluster.sql(f"ALTER DATABASE {db} RESET log_min_duration_statement", db=db)
    for w, s in scripts.items():
        with open(os.path.join(work, f"{db}_{w}.sql"), "w") as f:
            f.write(s)
    return scripts


def pgbench(cluster, db, path, seconds):
    argv = [os.path.join(cluster.bin, "pgbench"), "-n", "-M", "prepared", "-c1", "-T", str(seconds), "-f", path,
            cluster.url(db)]
    c0 = cluster.cpu_ticks()
    done = subprocess.run(argv, capture_output=True, text=True)
    c1 = cluster.cpu_ticks()
    if done.returncode != 0:
        raise SystemExit(f"pgbench on {db} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    out = done.stdout
    lat = float(re.search(r"latency average = ([\d.]+) ms", out).group(1))
    txs = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    return lat, (c1 - c0) * 1e6 / CLK / max(1, txs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the older revision's coursed binary")
    ap.add_argument("--now", required=True, help="this revision's coursed binary")
    ap.add_argument("--data", help="a SQLite catalogue the older revision can open (default: one it generates, "
                                   "100 modules x 100 subjects x 5 chapters)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="pgstatements-")
    os.chmod(work, 0o755)  # the cluster runs as the postgres user when this runs as root
    generated = not args.data
    if generated:
        args.data = os.path.join(work, "catalogue.db")
        subprocess.run([args.before, "generate", "--database", args.data, "--modules", "100", "--subjects-per-module",
                        "100", "--chapters-per-subject", "5"], check=True, capture_output=True)
    cluster = Cluster(os.path.join(work, "pg"), log).start()
    try:
        scripts = {}
        for name, binary in (("before", args.before), ("now", args.now)):
            cluster.sql(f"CREATE DATABASE {name}")
            # `copy` migrates its source to the binary's schema first: each copies a copy of its own.
            source = os.path.join(work, f"{name}.db")
            shutil.copyfile(args.data, source)
            subprocess.run([binary, "copy", "--from", source, "--to", cluster.url(name)], check=True,
                           capture_output=True)
            os.remove(source)
            cluster.sql("VACUUM ANALYZE", db=name)
        subject = cluster.sql("SELECT id FROM subjects ORDER BY id LIMIT 1 OFFSET 777", db="before")
        module = cluster.sql("SELECT id FROM modules ORDER BY id LIMIT 1 OFFSET 7", db="before")
        for name, binary in (("before", args.before), ("now", args.now)):
            scripts[name] = capture(cluster, binary, name, work, subject, module)
            cluster.sql("VACUUM ANALYZE", db=name)
        results = {(n, w): [] for n in scripts for w in WORKLOADS}
        for r in range(args.rounds):
            for w in WORKLOADS:
                for name in ("before", "now"):
                    results[(name, w)].append(pgbench(cluster, name, os.path.join(work, f"{name}_{w}.sql"),
                                                      args.seconds))
            log(f"round {r + 1} of {args.rounds} done")
        print(f"# PostgreSQL alone, the statements of each revision ({args.rounds} rounds of {args.seconds} s, "
              f"1 client, medians)\n")
        print("| workload | statements | before ms | now ms | now / before (time) | before db µs | now db µs |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for w in WORKLOADS:
            b = [x[0] for x in results[("before", w)]]
            n = [x[0] for x in results[("now", w)]]
            bc = [x[1] for x in results[("before", w)]]
            nc = [x[1] for x in results[("now", w)]]
            count = scripts["now"][w].count(";")
            print(f"| {w} | {count} | {statistics.median(b):.3f} | {statistics.median(n):.3f} | "
                  f"{statistics.median(n) / statistics.median(b):.2f} | {statistics.median(bc):.0f} | "
                  f"{statistics.median(nc):.0f} |")
        print(f"\nscripts in {work}")
    finally:
        cluster.stop()
        if generated:
            os.remove(args.data)


if __name__ == "__main__":
    main()

"""The workloads (wrk scripts under load/, the headers and status each needs) and one measured
wrk run against a server."""
import http.client
import os
import subprocess
from collections import namedtuple

from procs import cpu_ticks, machine_jiffies, wait_quiet

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "bench-token"
CORS_ORIGIN = "http://bench.example"
CLK = os.sysconf("SC_CLK_TCK")


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

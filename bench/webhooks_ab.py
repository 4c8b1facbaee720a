"""W4 with 3 webhooks on two builds of coursed, alternating their order each round, on SQLite and
(when its server binaries are installed) PostgreSQL; each start on a fresh copy of the same data.
With/without ratios drift with the machine; two builds doing the same work side by side drift
together, so this tells what a change to the deliveries is worth.

    python3 bench/webhooks_ab.py --baseline OLD_BIN [--rounds 4] [--engines sqlite,postgres]

Build first: cargo build --release --bin coursed --example webhook_load (the build measured),
and OLD_BIN from the revision to compare with (same schema version).
"""
import argparse
import collections
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import webhooks  # noqa: E402
from bench import catalogue_100, coursed_bin, fresh_copy, pg_pristine  # noqa: E402
from servers import Server  # noqa: E402
from workloads import TOKEN, wrk  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=4)
ap.add_argument("--engines", default="sqlite,postgres")
webhooks.run_options(ap, idle_wait=20)
ap.add_argument("--baseline", required=True, help="the coursed binary to compare with")
args = ap.parse_args()
args.no_pg = "postgres" not in args.engines
bins = {"old": args.baseline, "new": coursed_bin(args)}
work, out, data_dir, pristine = catalogue_100(args, "webhooks")
cluster = pg_pristine(args, work, pristine)
module = open(os.path.join(data_dir, "module_ids.txt")).readline().strip()
rps = collections.defaultdict(list)
try:
    engines = []
    if "sqlite" in args.engines:
        run_db = os.path.join(work, "run.db")
        engines.append(("sqlite", run_db, lambda: fresh_copy(pristine, run_db)))
    if cluster:
        engines.append(("postgres", cluster.url("coursed_work"), lambda: cluster.fresh("coursed_work", "coursed_pristine")))
    for engine, db, prepare in engines:
        for rnd in range(args.rounds):
            for name in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
                argv = [bins[name], "serve", "--port", "0", "--database", db, "--token", TOKEN, "--log-level", "warn", "--access-log", "off"]
                s = Server(f"{engine}-{name}", argv, ready_line="listening on http://", prepare=prepare,
                           db_ticks=cluster.cpu_ticks if engine == "postgres" else None)
                s.prepare(); s.start(os.path.join(out, f"ab-{engine}-{name}.log"))
                rec = webhooks.Receivers(args, db, f"127.0.0.1:{s.port}", module)
                try:
                    r = wrk(s, "W4", args, data_dir, out, f"ab-{engine}-{name}")
                    rps[(engine, name)].append(r["rps"])
                    print(f"{engine} {rnd} {name}: {r['rps']:7.0f} req/s coursed {r['cpu_us_per_req']} db {r['db_cpu_us_per_req']} busy {r['machine_busy_pct']}", flush=True)
                finally:
                    rec.stop(); s.stop()
        a, b = rps[(engine, "new")], rps[(engine, "old")]
        print(f"{engine} W4 with webhooks, this build / baseline: median {statistics.median(a)/statistics.median(b):.3f}, rounds {[round(x/y, 2) for x, y in zip(a, b)]}", flush=True)
finally:
    if cluster: cluster.stop()

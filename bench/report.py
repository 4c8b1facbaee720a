#!/usr/bin/env python3
"""Turns bench.py's results.json into a Markdown report with the ratios and targets.

Exit status 1 when a target with its reference measured in this run is missed."""
import json
import statistics
import sys

TARGETS = [
    # (workload, server, reference server, minimum ratio server / reference)
    ("W1", "coursed", "limit", 0.9),
    ("W2", "coursed", "peer", 40),
    ("W3", "coursed", "peer", 40),
    ("W4", "coursed", "peer", 10),
    ("W5", "coursed", "peer", 10),
    # On PostgreSQL: against the peer on the same cluster, and W1 against coursed on SQLite (the
    # network hop and PostgreSQL's own CPU on the same two cores cost, but not more than that).
    ("W1", "coursed-pg", "peer-pg", 10),
    ("W2", "coursed-pg", "peer-pg", 10),
    ("W3", "coursed-pg", "peer-pg", 10),
    ("W4", "coursed-pg", "peer-pg", 10),
    ("W5", "coursed-pg", "peer-pg", 10),
    ("W1", "coursed-pg", "coursed", 0.3),
    # Writes against their limit: the storage writing the same rows, words and revisions alone
    # (no HTTP), on each engine (sqlitealone.py, pgalone.py).
    ("W4", "coursed", "sqlite-alone", 0.8),
    ("W5", "coursed", "sqlite-alone", 0.8),
    ("W4", "coursed-pg", "pg-alone", 0.8),
    ("W5", "coursed-pg", "pg-alone", 0.8),
]
# Between two workloads, same run: (workload, server, reference workload, reference server, minimum).
WORKLOAD_TARGETS = [
    # A 304 checks a tag computed from the row, without rendering the document: well above a 200.
    # (On PostgreSQL the row read is most of a request's cost: W6 there is shown, with no target.)
    ("W6", "coursed", "W1", "coursed", 1.3),
    # CORS adds a few response headers to W1 (coursed-cors: a second coursed, --cors-origin).
    ("W1c", "coursed-cors", "W1", "coursed", 0.95),
]
# A change against the revision before it (bench.py --baseline): W1-W5 fall by at most 5 %.
BEFORE_AFTER = [(w, after, w, before, 0.95) for w in ("W1", "W2", "W3", "W4", "W5")
                for after, before in (("coursed", "coursed-before"), ("coursed-pg", "coursed-before-pg"))]
# The main table: the five, then the variants (after them, so that the five read as before).
ORDER = ("W1", "W2", "W3", "W4", "W5", "W6", "W1c", "W2z", "W3z")
VARIANTS = ("W6: W1 with If-None-Match of the subject's current tag, every answer a 304; W1c: W1 with an Origin, "
            "on coursed started with --cors-origin; W2z, W3z: W2, W3 with Accept-Encoding: gzip.")
# Information, no target: each plain workload against its gzip variant on the same server.
COMPRESSED = (("W2", "W2z"), ("W3", "W3z"))
RSS_ANON_MAX_MIB = 32
SCALE_W1_MIN, SCALE_W2_P50_MAX, READY_MAX_MS = 0.8, 2.0, 200


def med(xs):
    return statistics.median(xs) if xs else None


def median_of(rows, server, w, key="rps"):
    """Median `key` of the runs of `w` on `server` that measured it; None when none did."""
    return med([r[key] for r in rows if r["server"] == server and r["workload"] == w and r.get(key) is not None])


def ratio(rows, rounds, w, server, ref_w, ref, key="rps"):
    """Median `key` of (server, w) over that of (ref, ref_w), and the per-round ratios; None when
    either was not measured."""
    pick = lambda s, wl, rnd=None: [r[key] for r in rows if r["server"] == s and r["workload"] == wl
                                    and rnd in (None, r["round"]) and r.get(key) is not None]
    ours, theirs = pick(server, w), pick(ref, ref_w)
    if not ours or not theirs:
        return None
    per_round = []
    for rnd in rounds:
        o, t = pick(server, w, rnd), pick(ref, ref_w, rnd)
        if o and t:
            per_round.append(f"{o[0] / t[0]:.2f}")
    return med(ours) / med(theirs), per_round


def compression(rows, rounds, servers):
    """The informational table of W2/W3 against W2z/W3z, as lines (none when no variant ran)."""
    lines = []
    for plain, gz in COMPRESSED:
        for s in servers:
            # Throughput as gzip / plain (the cost), size as plain / gzip (the compression ratio).
            rps, size = ratio(rows, rounds, gz, s, plain, s), ratio(rows, rounds, plain, s, gz, s, "bytes_per_req")
            if not rps or not size:
                continue
            get = lambda w, k: median_of(rows, s, w, k)
            cpu = lambda w: get(w, "cpu_us_per_req") or "-"
            b_plain, b_gz = get(plain, "bytes_per_req"), get(gz, "bytes_per_req")
            lines.append(f"| {plain} / {gz} | {s} | {get(plain, 'rps'):.0f} / {get(gz, 'rps'):.0f} "
                         f"| {rps[0]:.2f} ({', '.join(rps[1])}) | {b_plain:.0f} / {b_gz:.0f} | {size[0]:.2f} "
                         f"| {b_plain - b_gz:.0f} | {cpu(plain)} / {cpu(gz)} |")
    if not lines:
        return []
    return ["Compression (information, no target): each workload plain and with Accept-Encoding: gzip on the same server. "
            "Bytes are what wrk read per response: status line, headers and body.\n",
            "| workloads | server | req/s plain / gzip | req/s gzip / plain (per round) | bytes/req plain / gzip "
            "| compression ratio | bytes saved/req | server CPU µs/req plain / gzip |",
            "|---|---|---:|---:|---:|---:|---:|---:|"] + lines


def alone(rows, rounds):
    """The informational table of what PostgreSQL writes by itself (pgalone.py), as lines."""
    lines = []
    for w in ("W4", "W5"):
        got = lambda s, k="rps": median_of(rows, s, w, k)
        if got("pg-alone") is None:
            continue
        over_peer = ratio(rows, rounds, w, "pg-alone", w, "peer-pg")
        share = ratio(rows, rounds, w, "coursed-pg", w, "pg-alone")
        db = lambda s: got(s, "db_cpu_us_per_req") or "-"
        lines.append(f"| {w} | {got('pg-alone'):.0f} | {f'{over_peer[0]:.2f}' if over_peer else '-'} "
                     f"| {f'{share[0]:.2f}' if share else '-'} | {db('pg-alone')} / {db('coursed-pg')} "
                     f"| {got('pg-alone', 'machine_busy_pct')} |")
    sqlite_lines, SQLITE = [], "coursed"
    for w in ("W4", "W5"):
        got = lambda s, k="rps": median_of(rows, s, w, k)
        if got("sqlite-alone") is None:
            continue
        share = ratio(rows, rounds, w, "coursed", w, "sqlite-alone")
        cap = got("sqlite-alone", "capacity_rps")
        sqlite_lines.append(f"| {w} | {got('sqlite-alone'):.0f} | {f'{cap:.0f}' if cap else '-'} "
                            f"| {f'{share[0]:.2f}' if share else '-'} "
                            f"| {f'{got(SQLITE) / cap:.2f}' if cap and got(SQLITE) else '-'} "
                            f"| {got('sqlite-alone', 'cpu_us_per_req') or '-'} / {got('coursed', 'cpu_us_per_req') or '-'} |")
    if sqlite_lines:
        sqlite_lines = ["What coursed's storage writes by itself on SQLite (sqlite-alone, examples/store_alone.rs): the same "
                        "rows, words and revisions through the store, with its writer's group commit and flush, from as many "
                        "clients as wrk's connections, no HTTP. Capacity is its rows a second of busy writer (information).\n",
                        "| workload | sqlite-alone rows/s | writer capacity rows/s | coursed / sqlite-alone "
                        "| coursed / capacity | CPU µs/row: alone / coursed |",
                        "|---|---:|---:|---:|---:|---:|"] + sqlite_lines + [""]
    if not lines:
        return sqlite_lines
    return sqlite_lines + ["What PostgreSQL writes by itself (information, no target): pg-alone is pgbench writing W4's and W5's rows "
            "into coursed's schema (its triggers and search index), 8 a transaction from as many clients as wrk's connections, with no HTTP server "
            "and no coursed (in the table above, its server CPU is pgbench's own). coursed on PostgreSQL cannot write faster "
            "than that on the same machine.\n",
            "| workload | pg-alone rows/s | pg-alone / peer-pg | coursed-pg / pg-alone "
            "| PostgreSQL CPU µs/row: alone / under coursed-pg | machine busy % (alone) |",
            "|---|---:|---:|---:|---:|---:|"] + lines


def main(path):
    res = json.load(open(path))
    rows = res["rounds"]
    rounds = sorted({r["round"] for r in rows})
    servers = []
    for r in rows:
        if r["server"] not in servers:
            servers.append(r["server"])
    pick = lambda s, w, k: [r[k] for r in rows if r["server"] == s and r["workload"] == w]
    m = res["meta"]
    print(f"Run of {m['date_utc']} UTC on {m['host']}, {m['cpus']} CPUs ({m['cpu']}); {m['wrk']}; {m['rustc']}; "
          f"{m['coursed']}; {m['settings']}.\n")
    print("| workload | server | req/s (median; per round) | p50 ms | p99 ms | non-2xx | server CPU µs/req | PostgreSQL CPU µs/req | machine busy % |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for w in ORDER:
        for s in servers:
            rps = pick(s, w, "rps")
            if not rps:
                continue
            per = " / ".join(f"{x:.0f}" for x in rps)
            ms = lambda k: "-" if None in pick(s, w, k) else f"{med(pick(s, w, k)):.2f}"
            print(f"| {w} | {s} | **{med(rps):.0f}** ({per}) | {ms('p50_ms')} | {ms('p99_ms')} "
                  f"| {sum(pick(s, w, 'non2xx'))} | {med([x for x in pick(s, w, 'cpu_us_per_req') if x is not None]) or '-'} "
                  f"| {med([x for x in pick(s, w, 'db_cpu_us_per_req') if x is not None]) or '-'} "
                  f"| {med(pick(s, w, 'machine_busy_pct'))} |")
    if any(r["workload"] in ORDER[5:] for r in rows):
        other = sorted({(r["workload"], r["expect"]) for r in rows if r.get("expect", "2xx") != "2xx"})
        print(f"\n{VARIANTS}" + "".join(f" The non-2xx column counts, for {w}, every status but {e}." for w, e in other))
    print()
    failed = []
    verdicts = []
    targets = [(w, server, w, ref, need) for w, server, ref, need in TARGETS] + WORKLOAD_TARGETS + BEFORE_AFTER
    for w, server, ref_w, ref, need in targets:
        got = ratio(rows, rounds, w, server, ref_w, ref)
        if not got:
            continue
        value, per_round = got
        ok = value >= need
        # Between two workloads, the server too: W6 has a target on SQLite and on PostgreSQL.
        failed += [] if ok else [w if w == ref_w else f"{w} ({server})"]
        of = f"{server} / {ref}" if w == ref_w else f"{server} {w} / {ref} {ref_w}"
        verdicts.append(f"| {w} | {of} | {value:.2f} ({', '.join(per_round)}) | ≥ {need} | {'met' if ok else 'MISSED'} |")
    mem = [x for x in res["memory"] if x["server"] == "coursed"]
    if mem:
        anon = max(x["rss_anon_kib"] for x in mem) / 1024
        ok = anon <= RSS_ANON_MAX_MIB
        failed += [] if ok else ["memory"]
        verdicts.append(f"| memory | coursed RssAnon at the end, MiB (worst round) | {anon:.1f} | ≤ {RSS_ANON_MAX_MIB} | {'met' if ok else 'MISSED'} |")
    sc = res.get("scale")
    if sc:
        runs = sc["runs"]
        get = lambda size, w, k: med([r[k] for r in runs if r["size"] == size and r["workload"] == w])
        w1 = get("1m", "W1", "rps") / get("10k", "W1", "rps")
        w2 = get("1m", "W2", "p50_ms") / get("10k", "W2", "p50_ms")
        ready = med(sc["ready_ms"])
        for name, value, need, ok in (
            ("scale W1", f"{w1:.2f} (1M: {get('1m', 'W1', 'rps'):.0f}, 10k: {get('10k', 'W1', 'rps'):.0f} req/s)", f"≥ {SCALE_W1_MIN}", w1 >= SCALE_W1_MIN),
            ("scale W2", f"{w2:.2f} (p50 1M: {get('1m', 'W2', 'p50_ms'):.2f}, 10k: {get('10k', 'W2', 'p50_ms'):.2f} ms)", f"≤ {SCALE_W2_P50_MAX}", w2 <= SCALE_W2_P50_MAX),
            ("ready", f"{ready:.0f} ms (median of {len(sc['ready_ms'])})", f"≤ {READY_MAX_MS} ms", ready <= READY_MAX_MS),
        ):
            failed += [] if ok else [name]
            verdicts.append(f"| {name} | | {value} | {need} | {'met' if ok else 'MISSED'} |")
    if verdicts:
        print("| target | ratio of | measured (per round) | needed | |")
        print("|---|---|---:|---:|---|")
        print("\n".join(verdicts))
        print()
    table = alone(rows, rounds)
    if table:
        print("\n".join(table))
        print()
    table = compression(rows, rounds, servers)
    if table:
        print("\n".join(table))
        print()
    print("| server | peak RSS (VmHWM), MiB, per round | RssAnon at end, MiB, per round |")
    print("|---|---:|---:|")
    for s in servers:
        xs = [x for x in res["memory"] if x["server"] == s]
        if not xs:
            continue
        hwm = " / ".join(str(x["vmhwm_kib"] // 1024) for x in xs)
        anon = " / ".join("%.1f" % (x["rss_anon_kib"] / 1024) for x in xs)
        print(f"| {s} | {hwm} | {anon} |")
    if failed:
        print(f"\nMissed: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1])

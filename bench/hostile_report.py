"""The report of bench/hostile.py (a Markdown text) and its targets: every request within 1 s and
20 x its twin, the pollers' p99 within 50 ms while hostile clients run, the server's private memory
within 256 MiB.

    python3 bench/hostile_report.py RESULTS.json     # the report of a saved run again
"""
import json
import sys

MAX_MS, MAX_RATIO, MAX_P99_MS, MAX_RSS_MIB = 1000, 20, 50, 256


def ratio(row):
    h, t = row["hostile"]["median_ms"], max(row["twin"]["median_ms"], 0.01)
    if row.get("per_op"):
        n_h, n_t = row["per_op"]
        return (h / n_h) / (t / n_t)
    return h / t


def verdict(row):
    """PASS, or FAIL and why."""
    h, t = row["hostile"], row["twin"]
    why = []
    statuses = h["status"].split("/") + t["status"].split("/")
    if "timeout" in statuses:
        why.append("timeout")
    if "error" in statuses:
        why.append("connection failed")
    if any(s.isdigit() and s.startswith("5") and s != "503" for s in statuses):
        why.append("5xx")
    if max(h["max_ms"], t["max_ms"]) > MAX_MS:
        why.append("> 1 s")
    if ratio(row) > MAX_RATIO:
        why.append(f"> {MAX_RATIO} x" + (" per op" if row.get("per_op") else ""))
    return "PASS" if not why else "FAIL: " + ", ".join(why)


def ms(v):
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 1 else f"{v:.2f}"


def size(n):
    return f"{n / 1048576:.1f} MiB" if n >= 1048576 else f"{n / 1024:.1f} KiB" if n >= 10240 else f"{n} B"


def engine_report(e, lines, counts):
    lines.append(f"\n## {e['engine']}\n")
    lines.append(f"Commonest chapter word '{e['word']}' in {e['word_total']:,} chapters. Machine busy {e['machine_busy_pct']} % "
                 f"over the run; the server was started {e['starts']} time(s).\n")
    lines.append("| group | request | n | median ms | max ms | twin median ms | hostile / twin | status | twin status "
                 "| size | twin size | target |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|")
    for r in e["pairs"]:
        h, t = r["hostile"], r["twin"]
        v = verdict(r)
        counts.append((e["engine"], "request", r["name"], v))
        x = ratio(r)
        rx = f"{x:,.0f}" if x >= 100 else f"{x:.1f}"
        if r.get("per_op"):
            rx += f" per op; {h['median_ms'] / max(t['median_ms'], 0.01):,.0f} in all"
        lines.append(f"| {r['group']} | {r['name']} | {h['n']} | {ms(h['median_ms'])} | {ms(h['max_ms'])} | "
                     f"{ms(t['median_ms'])} | {rx} | {h['status']} | {t['status']} | {size(h['size'])} | "
                     f"{size(t['size'])} | {v} |")
    if e["phases"]:
        lines.append("\nInterference: the pollers alone (quiet), then beside the hostile clients; p50 / p99 / max in ms.\n")
        lines.append("| hostile clients | poller | quiet | with hostile clients | requests (failed) | hostile answered "
                     "(timed out) | idle again after | machine busy | target p99 <= 50 ms |")
        lines.append("|---|---|---|---|---:|---:|---:|---:|---|")
        for p in e["phases"]:
            for name in ("healthz", "subject"):
                q, d = p["quiet"][name], p["during"][name]
                ok = d["p99_ms"] is not None and d["p99_ms"] <= MAX_P99_MS and not d["failed"]
                v = "PASS" if ok else "FAIL"
                counts.append((e["engine"], "interference", f"{p['label']}: {name}", v))
                settle = f"not within {p['settle_limit_s']} s" if p["settle_s"] is None else f"{p['settle_s']} s"
                lines.append(f"| {p['label']} | {'GET /healthz' if name == 'healthz' else 'GET /v1/subjects/{id}'} | "
                             f"{ms(q['p50_ms'])} / {ms(q['p99_ms'])} / {ms(q['max_ms'])} | "
                             f"{ms(d['p50_ms'])} / {ms(d['p99_ms'])} / {ms(d['max_ms'])} | {d['n']} ({d['failed']}) | "
                             f"{p['hostile_done']} ({p['hostile_timeouts']}) | {settle} | {p['machine_busy_pct']} % | {v} |")
    mib = e["peak_anon_kib"] / 1024
    v = "PASS" if mib <= MAX_RSS_MIB else "FAIL"
    counts.append((e["engine"], "memory", "peak private memory", v))
    lines.append(f"\nServer memory: peak private (RssAnon) **{mib:,.0f} MiB**, reached during: {e['peak_at']}; target <= "
                 f"{MAX_RSS_MIB} MiB: {v}. Peak resident set (VmHWM) {e['peak_rss_kib'] / 1024:,.0f} MiB"
                 + (", which counts the database file's pages that coursed maps." if e["engine"] == "SQLite" else ".") + "\n")
    if e["notes"]:
        lines.append("Notes:\n")
        lines.extend(f"- {n}" for n in e["notes"])


def report(results):
    m = results["meta"]
    lines = [f"# Hostile requests ({m['date_utc']} UTC; {m['shape'][0]} modules x {m['shape'][1]} subjects x "
             f"{m['shape'][2]} chapters; {m['cpus']} CPUs)"]
    counts = []
    for e in results["engines"]:
        engine_report(e, lines, counts)
    lines.append("\n## Targets\n")
    failed = [c for c in counts if c[3] != "PASS"]
    for engine in dict.fromkeys(c[0] for c in counts):
        mine = [c for c in counts if c[0] == engine]
        per = ", ".join(f"{kind} {sum(c[3] == 'PASS' for c in mine if c[1] == kind)}/{sum(c[1] == kind for c in mine)}"
                        for kind in ("request", "interference", "memory"))
        lines.append(f"- {engine}: {per}")
    lines.append(f"\nSUMMARY: {len(counts) - len(failed)} of {len(counts)} targets met"
                 + (f"; {len(failed)} FAILED" if failed else "; all PASS"))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(report(json.load(f)))

#!/usr/bin/env bash
# How far W4 (creates) or W5 (title updates) can go on this machine without what coursed promises
# of a write: the same build in four configurations, alternating, each on a fresh copy of one
# generated catalogue, `wrk -t1 -c16` (the workload's script) for DUR seconds after a second of
# warm-up:
#
#   shipped     as it is
#   no-index    the search indexes' triggers dropped (the writer then indexes nothing)
#   normal      --durability normal (a commit is not flushed before its answer)
#   neither     both: what the peer does
#
#   bench/write-bounds.sh [BIN]     (default target/release/coursed; WORKLOAD=W4 or W5, ROUNDS=2, DUR=8)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/port.sh
command -v wrk >/dev/null || { sudo=$([ "$(id -u)" = 0 ] || echo sudo); $sudo apt-get install -y -qq wrk >/dev/null; }
bin=${1:-target/release/coursed}
rounds=${ROUNDS:-2}
dur=${DUR:-8}
case ${WORKLOAD:-W4} in
  W4) script=bench/load/w4_create_subject.lua ;;
  W5) script=bench/load/w5_patch_subject.lua ;;
  *) echo "WORKLOAD is W4 or W5" >&2; exit 2 ;;
esac
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
"$bin" generate --database "$work/shipped.db" --modules 100 --subjects-per-module 100 --chapters-per-subject 5 \
  --ids-dir "$work" >/dev/null
cp "$work/shipped.db" "$work/no-index.db"
python3 - "$work/no-index.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%\\_search\\_%' ESCAPE '\\'").fetchall():
    c.execute(f"DROP TRIGGER {name}")
c.commit()
PY
for r in $(seq "$rounds"); do
  for config in shipped no-index normal neither; do
    case $config in
      shipped|normal) db=shipped ;;
      *) db=no-index ;;
    esac
    case $config in
      normal|neither) flags=(--durability normal) ;;
      *) flags=() ;;
    esac
    rm -f "$work/run.db" "$work/run.db-wal" "$work/run.db-shm"
    cp "$work/$db.db" "$work/run.db"
    "$bin" serve --port 0 --database "$work/run.db" --token bench-token --log-level warn "${flags[@]}" \
      >"$work/server.log" 2>&1 &
    pid=$!
    port=$(port_of "$work/server.log")
    BENCH_DATA=$work wrk -t1 -c16 -d1s -s "$script" "http://127.0.0.1:$port" >/dev/null 2>&1
    result=$(BENCH_DATA=$work wrk -t1 -c16 -d"${dur}s" -s "$script" "http://127.0.0.1:$port" | grep '^RESULT ')
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    rps=$(sed -n 's/.* rps=\([0-9.]*\).*/\1/p' <<<"$result")
    bad=$(sed -n 's/.* non2xx=\([0-9]*\).*/\1/p' <<<"$result")
    # A failed write is no throughput: stop instead of counting it.
    [ "${bad:-1}" = 0 ] || { echo "${WORKLOAD:-W4} $config: ${bad:-?} answers outside 2xx" >&2; exit 1; }
    echo "${WORKLOAD:-W4}  round $r  $config  $rps req/s"
  done
done

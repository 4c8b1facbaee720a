#!/usr/bin/env bash
# Writes as the benchmark makes them, to compare builds: on one server, W4 (creates) for a 3 s
# warm-up and DUR seconds, then W5 (title updates) the same, `wrk -t1 -c16`, each build on a fresh
# copy of one generated catalogue, the builds alternating for ROUNDS rounds. Prints req/s and
# p50 / p90 / p99. With TRACE=1 the servers log at trace level (which costs them throughput)
# and it also prints how long the writer's own checkpoints held the writes.
#
#   bench/write-tails.sh [BIN ...]     (default target/release/coursed; ROUNDS=2, DUR=10, TRACE=0)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/port.sh
command -v wrk >/dev/null || { sudo=$([ "$(id -u)" = 0 ] || echo sudo); $sudo apt-get install -y -qq wrk >/dev/null; }
[ $# -gt 0 ] || set -- target/release/coursed
rounds=${ROUNDS:-2}
dur=${DUR:-10}
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
"$1" generate --database "$work/pristine.db" --modules 100 --subjects-per-module 100 --chapters-per-subject 5 \
  --ids-dir "$work" >/dev/null
run() { # run SCRIPT SECONDS: the RESULT line's figures, or a failure on any answer outside 2xx
  local result
  result=$(BENCH_DATA=$work wrk -t1 -c16 -d"$2" -s "bench/load/$1.lua" "http://127.0.0.1:$port" | grep '^RESULT ')
  grep -q ' non2xx=0 ' <<<"$result" || { echo "$1: answers outside 2xx: $result" >&2; exit 1; }
  sed -n 's/.* rps=\([0-9.]*\) p50_us=\([0-9]*\) p90_us=\([0-9]*\) p99_us=\([0-9]*\).*/\1 req\/s  p50 \2  p90 \3  p99 \4 µs/p' <<<"$result"
}
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    rm -f "$work"/run.db*
    cp "$work/pristine.db" "$work/run.db"
    level=warn
    [ "${TRACE:-0}" = 1 ] && level=trace
    "$bin" serve --port 0 --database "$work/run.db" --token bench-token --log-level "$level" >"$work/server.log" 2>&1 &
    pid=$!
    port=$(port_of "$work/server.log")
    run w4_create_subject 3s >/dev/null
    w4=$(run w4_create_subject "${dur}s")
    run w5_patch_subject 3s >/dev/null
    w5=$(run w5_patch_subject "${dur}s")
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    echo "round $r  $bin"
    echo "  W4  $w4"
    echo "  W5  $w5"
    if [ "${TRACE:-0}" = 1 ]; then
      held=$({ grep -o 'checkpoint on the writer at [0-9]* WAL pages: 0, [0-9]* µs' "$work/server.log" || true; } |
        awk '{print $(NF-1)}' | sort -n |
        awk '{a[NR]=$1; s+=$1} END {if (NR) printf "%d, p50 %d µs, max %d µs, %.0f ms in all", NR, a[int((NR+1)/2)], a[NR], s/1000; else print "none logged"}')
      echo "  writer's own checkpoints: $held"
    fi
  done
done

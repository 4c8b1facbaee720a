#!/usr/bin/env bash
# The change feed under load, on SQLite: reading the whole feed by pages (revisions per second
# to one client; the target is 20,000), then the live stream with many subscribers while
# subjects are created at a steady rate (examples/stream_fanout.rs: delivery latency from
# commit, deliveries made, server memory).
#
#   bench/stream.sh [SUBSCRIBERS:RATE ...]     default: 1000:50 100:500 1000:500
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
WORK=${BENCH_WORK:-/tmp/coursed-bench}/stream
mkdir -p "$WORK"
cd "$REPO"
cargo build --locked --release --bin coursed --example stream_fanout
BIN=$REPO/target/release/coursed
FANOUT=$REPO/target/release/examples/stream_fanout
TOKEN=stream-bench-token-0123456789
RUNS=("$@")
[ ${#RUNS[@]} -gt 0 ] || RUNS=(1000:50 100:500 1000:500)

start() {
  rm -f "$WORK"/db.sqlite*
  "$BIN" generate --database "$WORK/db.sqlite" --modules 100 --subjects-per-module 100 --chapters-per-subject 5 >/dev/null
  ulimit -n 8192
  "$BIN" serve --host 127.0.0.1 --port 0 --database "$WORK/db.sqlite" --token "$TOKEN" --log-level warn \
    --max-connections 2048 --max-streams 1100 --access-log off > "$WORK/out" 2> "$WORK/err" &
  PID=$!
  for _ in $(seq 1 300); do
    ADDR=$(sed -n 's#^listening on http://\(.*\)/v1$#\1#p' "$WORK/out")
    [ -n "$ADDR" ] && break
    sleep 0.1
  done
  [ -n "$ADDR" ] || { echo "the server did not start: $(cat "$WORK/err")" >&2; exit 1; }
}
stop() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
trap stop EXIT

start
python3 "$HERE/feed.py" "http://$ADDR/v1" "$TOKEN"
MODULE=$(curl -s -H "Authorization: Bearer $TOKEN" "http://$ADDR/v1/modules?page[size]=1" -g | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
stop
for run in "${RUNS[@]}"; do
  start
  ulimit -n 8192
  "$FANOUT" "$ADDR" "$TOKEN" "$MODULE" "${run%%:*}" "${run##*:}" 10 "$PID"
  stop
done

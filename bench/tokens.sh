#!/usr/bin/env bash
# What a database token costs a request, against a configured one (--token), on SQLite:
# W1 (GET /v1/subjects/{id}) with wrk, alternating the two tokens for a few rounds, and the
# latency of a database token's first request in a fresh process (its PBKDF2 hash) against its
# second.
#
#   bench/tokens.sh [BIN]     (default target/release/coursed; ROUNDS=3, SECONDS_EACH=10)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/port.sh
bin=${1:-target/release/coursed}
rounds=${ROUNDS:-3}
secs=${SECONDS_EACH:-10}
work=$(mktemp -d)
server=
stop() { [ -z "$server" ] || { kill -INT "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }; server=; }
trap 'stop; rm -rf "$work"' EXIT

"$bin" generate --database "$work/w1.db" --ids-dir "$work" >/dev/null
db_token=$("$bin" token create --database "$work/w1.db" --name bench --scope read 2>/dev/null)

start() {
  "$bin" serve --port 0 --database "$work/w1.db" --token bench-token --log-level warn >"$work/server.log" 2>&1 &
  server=$!
  local port
  port=$(port_of "$work/server.log") || { echo "coursed did not start" >&2; cat "$work/server.log" >&2; exit 1; }
  url="http://127.0.0.1:$port"
}

# First and second request of a database token in a fresh process.
start
subject=$(head -1 "$work/subject_ids.txt")
for n in first second third; do
  t=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $db_token" "$url/v1/subjects/$subject")
  echo "database token, $n request in a fresh process: $(awk -v t="$t" 'BEGIN {printf "%.1f", t * 1000}') ms"
done

for round in $(seq 1 "$rounds"); do
  for kind in configured database; do
    token=bench-token
    [ "$kind" = database ] && token=$db_token
    line=$(BENCH_DATA="$work" BENCH_TOKEN="$token" wrk -t2 -c16 -d"${secs}s" -s bench/load/w1_get_subject.lua "$url" |
      grep -E '^Requests/sec|^RESULT' | tr '\n' ' ')
    echo "round $round, $kind token: $line"
  done
done
stop

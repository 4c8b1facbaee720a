#!/usr/bin/env bash
# What the access log costs: W1 (GET /v1/subjects/{id}) with the log on, written to a file,
# against the log off, on the same binary and the same generated 10,000-subject catalogue, in
# alternating rounds (wrk -t1 -c16, as bench/run.sh).
#
#   bench/access-log.sh            (BIN=target/release/coursed ROUNDS=3 DURATION=10s)
#
# Prints requests per second of each round and the ratio of the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/port.sh
command -v wrk >/dev/null || { sudo=$([ "$(id -u)" = 0 ] || echo sudo); $sudo apt-get install -y -qq wrk >/dev/null; }
bin=${BIN:-target/release/coursed}
rounds=${ROUNDS:-3}
duration=${DURATION:-10s}
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" generate --database "$work/w1.db" --ids-dir "$work" >/dev/null

# start NAME FLAGS...: serves a copy of the catalogue; sets $port
start() {
  local name=$1
  shift
  cp "$work/w1.db" "$work/$name.db"
  "$bin" serve --port 0 --database "$work/$name.db" --token bench-token "$@" >"$work/$name.out" 2>"$work/$name.log" &
  pids+=($!)
  port=$(port_of "$work/$name.out") || { echo "coursed ($name) did not start" >&2; exit 1; }
}
start on --log-level info
on_port=$port
start off --log-level info --access-log off
off_port=$port

w1() {
  BENCH_DATA=$work wrk -t1 -c16 -d2s -s bench/load/w1_get_subject.lua "http://127.0.0.1:$1" >/dev/null
  BENCH_DATA=$work wrk -t1 -c16 -d"$duration" -s bench/load/w1_get_subject.lua "http://127.0.0.1:$1" |
    awk '/Requests\/sec/ {print $2}'
}
on=()
off=()
for r in $(seq 1 "$rounds"); do
  on+=("$(w1 "$on_port")")
  off+=("$(w1 "$off_port")")
  echo "round $r: on ${on[-1]} req/s, off ${off[-1]} req/s"
done
lines=$(grep -c ' access ' "$work/on.log" || true)
python3 - "${on[*]}" "${off[*]}" "$lines" <<'PY'
import statistics, sys
on, off = [float(x) for x in sys.argv[1].split()], [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(on), statistics.median(off)
print(f"median: on {a:.0f} req/s, off {b:.0f} req/s: the log costs {100 * (1 - a / b):.1f} % "
      f"({int(sys.argv[3])} lines written)")
PY

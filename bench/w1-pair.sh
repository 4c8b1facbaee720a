#!/usr/bin/env bash
# W1 (GET /v1/subjects/{id}) on one binary started twice over copies of the same generated
# 10,000-subject catalogue, with two sets of flags, in alternating rounds (wrk -t1 -c16, as
# bench/run.sh): what a setting costs, measured against itself in the same run.
#
#   bench/w1-pair.sh "FLAGS OF A" "FLAGS OF B"   (BIN=target/release/coursed ROUNDS=3 DURATION=10s)
#
# Prints requests per second of each round and the ratio of the medians (A / B). While it
# runs, $work/{a,b}.out and .log hold each server's output, for the scripts that call it
# (a hook, `during_rounds`, may be defined by them).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/port.sh
command -v wrk >/dev/null || { sudo=$([ "$(id -u)" = 0 ] || echo sudo); $sudo apt-get install -y -qq wrk >/dev/null; }
bin=${BIN:-target/release/coursed}
rounds=${ROUNDS:-3}
duration=${DURATION:-10s}
read -r -a flags_a <<<"$1"
read -r -a flags_b <<<"$2"
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
start a "${flags_a[@]}"
a_port=$port
start b "${flags_b[@]}"
b_port=$port
if declare -F during_rounds >/dev/null; then
  during_rounds "$work" &
  pids+=($!)
fi

w1() {
  BENCH_DATA=$work wrk -t1 -c16 -d2s -s bench/load/w1_get_subject.lua "http://127.0.0.1:$1" >/dev/null
  BENCH_DATA=$work wrk -t1 -c16 -d"$duration" -s bench/load/w1_get_subject.lua "http://127.0.0.1:$1" |
    awk '/Requests\/sec/ {print $2}'
}
a=()
b=()
for r in $(seq 1 "$rounds"); do
  a+=("$(w1 "$a_port")")
  b+=("$(w1 "$b_port")")
  echo "round $r: A ${a[-1]} req/s, B ${b[-1]} req/s"
done
python3 - "${a[*]}" "${b[*]}" <<'PY'
import statistics, sys
a, b = [float(x) for x in sys.argv[1].split()], [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"median: A {ma:.0f} req/s, B {mb:.0f} req/s: A / B = {ma / mb:.3f}")
PY
if declare -F after_rounds >/dev/null; then
  after_rounds "$work"
fi

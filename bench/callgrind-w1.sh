#!/usr/bin/env bash
# Instructions per W1 request (GET /v1/subjects/{id}) under callgrind: a measure of the server's
# own work that the machine's noise does not move, for comparing two builds.
#
#   bench/callgrind-w1.sh [BIN ...]     (default target/release/coursed; N=3000 requests)
#   LOG_LEVEL=info bench/callgrind-w1.sh    (the server's --log-level, default warn: info turns
#                                           the access log on)
#   CORS=1 bench/callgrind-w1.sh            (W1c: the server started with --cors-origin, every
#                                           request sending that Origin)
#   KEEP=DIR bench/callgrind-w1.sh A B      (keeps each binary's profile as DIR/cg-1.out, cg-2.out, ...
#                                           for callgrind_annotate: where the instructions went)
#
# Each binary serves a generated 10,000-subject catalogue under valgrind; N keep-alive requests
# for random subjects are sent; the program's total instructions / N is printed (start-up and
# shutdown included, a few hundred instructions per request at N=3000).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/port.sh
command -v valgrind >/dev/null || { sudo=$([ "$(id -u)" = 0 ] || echo sudo); $sudo apt-get install -y -qq valgrind >/dev/null; }
n=${N:-3000}
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/coursed)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${bins[0]}" generate --database "$work/w1.db" --ids-dir "$work" >/dev/null
i=0
for bin in "${bins[@]}"; do
  i=$((i + 1))
  cp "$work/w1.db" "$work/run.db"
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$bin" serve --port 0 --database "$work/run.db" \
    --token bench-token --log-level "${LOG_LEVEL:-warn}" ${CORS:+--cors-origin http://bench.example} \
    >"$work/server.log" 2>&1 &
  pid=$!
  port=$(port_of "$work/server.log") || { echo "$bin did not start" >&2; kill "$pid"; exit 1; }
  python3 - "$port" "$work/subject_ids.txt" "$n" "${CORS:+http://bench.example}" <<'PY'
import http.client, random, sys
port, ids_file, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
headers = {"Authorization": "Bearer bench-token", **({"Origin": sys.argv[4]} if sys.argv[4] else {})}
ids = [l.strip() for l in open(ids_file) if l.strip()]
random.seed(1)
c = http.client.HTTPConnection("127.0.0.1", port)
for _ in range(n):
    c.request("GET", "/v1/subjects/" + random.choice(ids), headers=headers)
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
PY
  kill -INT "$pid"
  wait "$pid" 2>/dev/null || true
  total=$(callgrind_annotate "$work/cg.out" 2>/dev/null | grep "PROGRAM TOTALS" | awk '{gsub(",", "", $1); print $1}')
  echo "$bin: $((total / n)) instructions per W1 request ($n requests)"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work/cg.out" "$KEEP/cg-$i.out"; fi
done

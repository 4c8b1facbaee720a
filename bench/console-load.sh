#!/usr/bin/env bash
# The console's cold load of the module list, on a generated catalogue (100 modules of 100
# subjects of 5 chapters unless told otherwise), in Debian's Chromium with nothing cached;
# target: the list shown within 300 ms (median). See bench/console_load.mjs.
#
#   bench/console-load.sh [ROUNDS] [generate flags, e.g. --modules 1000]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROUNDS=${1:-20}
shift || true
command -v chromium >/dev/null || { echo "installing chromium" >&2; apt-get install -y -qq chromium >/dev/null; }
cd "$REPO"
cargo build --locked --release --bin coursed
(cd tests/console && npm ci --no-audit --no-fund --loglevel=error)
WORK=$(mktemp -d)
SERVER=
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
target/release/coursed generate --database "$WORK/load.db" "$@" >/dev/null
TOKEN=console-load-bench
target/release/coursed serve --host 127.0.0.1 --port 0 --database "$WORK/load.db" --token "$TOKEN" \
  --access-log off > "$WORK/out" 2> "$WORK/err" &
SERVER=$!
for _ in $(seq 300); do
  grep -q "listening on" "$WORK/out" 2>/dev/null && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/err" >&2; exit 1; }
  sleep 0.1
done
BASE=$(sed -n 's|^listening on \(http://[^/]*\)/v1$|\1|p' "$WORK/out")
node "$HERE/console_load.mjs" "$BASE" "$TOKEN" "$ROUNDS"

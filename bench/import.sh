#!/usr/bin/env bash
# coursed import throughput: generates the 10,000-subject catalogue (100 modules x 100 subjects,
# 5 chapters each: 60,100 resources), exports it as a bundle, and times `coursed import` of that
# bundle into a new SQLite file and, when PostgreSQL's server binaries are there, into a new
# database on a throwaway cluster (fsync on). Reports resources per second and the peak memory
# of export and import.
#
#   bench/import.sh            release build (built first)
#   bench/import.sh --debug    the debug build, for a quick check (figures not comparable)
#
# Everything goes under $BENCH_WORK/import (default /tmp/coursed-bench/import), wiped first.
# BENCH_MODULES and BENCH_SUBJECTS_PER_MODULE change the size (e.g. 1000 x 1000 for 1,000,000).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
SHARED=${BENCH_SHARED:-$REPO/../shared/bench}
WORK=${BENCH_WORK:-/tmp/coursed-bench}/import
MODULES=${BENCH_MODULES:-100}
PER_MODULE=${BENCH_SUBJECTS_PER_MODULE:-100}
PROFILE=release
[ "${1:-}" = --debug ] && PROFILE=debug

cd "$REPO"
if [ "$PROFILE" = release ]; then cargo build --locked --release -q; else cargo build --locked -q; fi
BIN=$REPO/target/$PROFILE/coursed

rm -rf "$WORK" && mkdir -p "$WORK"
log() { echo "import bench: $*" >&2; }

# Runs a command; prints "SECONDS PEAK_KIB" (peak resident memory, from GNU time when installed).
measure() {
  local start end peak=-
  start=$(date +%s.%N)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$WORK/peak" "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; return 1; }
    peak=$(tail -n1 "$WORK/peak")
  else
    "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; return 1; }
  fi
  end=$(date +%s.%N)
  echo "$(awk "BEGIN { print $end - $start }") $peak"
}

log "generating $MODULES x $PER_MODULE subjects ($PROFILE build)"
"$BIN" generate --database "$WORK/source.db" --modules "$MODULES" --subjects-per-module "$PER_MODULE" >/dev/null
read -r secs peak < <(measure "$BIN" export --database "$WORK/source.db" --output "$WORK/catalogue.jsonl")
ROWS=$(tail -n1 "$WORK/catalogue.jsonl" | python3 -c 'import json,sys; print(sum(json.load(sys.stdin)["counts"].values()))')
SIZE=$(stat -c %s "$WORK/catalogue.jsonl")
printf '%-28s %10s %12s %14s %12s\n' "step" "resources" "seconds" "resources/s" "peak MiB"
row() { printf '%-28s %10d %12.2f %14.0f %12s\n' "$1" "$ROWS" "$2" "$(awk "BEGIN { print $ROWS / $2 }")" "$3"; }
mib() { [ "$1" = - ] && echo - || echo $(( $1 / 1024 )); }
row "export (SQLite, $((SIZE / 1048576)) MiB)" "$secs" "$(mib "$peak")"

read -r secs peak < <(measure "$BIN" import --database "$WORK/target.db" "$WORK/catalogue.jsonl")
row "import into SQLite" "$secs" "$(mib "$peak")"
read -r secs peak < <(measure "$BIN" import --database "$WORK/target.db" --merge "$WORK/catalogue.jsonl")
row "SQLite --merge (all updates)" "$secs" "$(mib "$peak")"

if [ -x "$SHARED/pg/cluster.sh" ] || [ -f "$SHARED/pg/cluster.sh" ]; then
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  URL=$(bash "$SHARED/pg/cluster.sh" start "$WORK/pg" "$PORT" | tail -n1)
  trap 'bash "$SHARED/pg/cluster.sh" stop "$WORK/pg" >/dev/null 2>&1 || true' EXIT
  read -r secs peak < <(measure "$BIN" import --database "$URL" "$WORK/catalogue.jsonl")
  row "import into PostgreSQL" "$secs" "$(mib "$peak")"
  read -r secs peak < <(measure "$BIN" import --database "$URL" --merge "$WORK/catalogue.jsonl")
  row "PostgreSQL --merge (updates)" "$secs" "$(mib "$peak")"
else
  log "no throwaway PostgreSQL cluster script at $SHARED/pg/cluster.sh: PostgreSQL skipped"
fi

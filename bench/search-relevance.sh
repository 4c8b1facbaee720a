#!/usr/bin/env bash
# Best match first against sort=id, the same searches, on the 150,000-chapter catalogue (300
# modules x 100 subjects x 5 chapters), on SQLite and, when PostgreSQL's server binaries are
# installed, on a throwaway cluster (bench/pg.py): the first, a middle and the last page of 20,
# ROUNDS rounds alternating the two orders; prints the median of each and their ratio.
#
# The generator leaves chapters without content, so a chapter would hold a word only in its
# title and best match first would be one tier. Each chapter is given its subject's content (and
# its words) before the timing: `content`, a word of the generator's vocabulary, is then in 81 %
# of the chapters and in 11 % of their titles.
#
#   bench/search-relevance.sh [--no-pg]     (ROUNDS=5; BIN=target/release/coursed, built first)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/port.sh
rounds=${ROUNDS:-5}
no_pg=; [ "${1:-}" = --no-pg ] && no_pg=1
if [ -z "${BIN:-}" ]; then cargo build --release --locked --quiet; fi
bin=${BIN:-target/release/coursed}
work=$(mktemp -d)
chmod 755 "$work" # the PostgreSQL cluster below it runs as another user
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -d "$work/pg" ] && python3 bench/pg.py stop "$work/pg"
  rm -rf "$work"
}
trap cleanup EXIT
shape=(--modules 300 --subjects-per-module 100 --chapters-per-subject 5)
fill="UPDATE chapters SET content = s.content, content_words = s.content_words
      FROM subjects AS s WHERE s.id = chapters.subject_id"
searches=(
  "chapters?filter[search]=content"
  "chapters?filter[search]=content%20data"
  "chapters?filter[search]=cont*"
  "chapters?filter[search]=%22content%20data%22"
  "subjects?filter[search]=content&filter[available_for_courses]=true"
)

# Seconds of one GET of $base/$1 (its body in $work/body).
get() {
  curl -sfg -o "$work/body" -w '%{time_total}' -H 'Authorization: Bearer bench-token' "$base/$1"
}

# Times every search on the server at $base; one line per page.
measure() {
  local engine=$1 search last page order times
  for search in "${searches[@]}"; do
    get "$search&page[size]=20" >/dev/null
    last=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["meta"]["page"].get("lastPage", 1))' "$work/body")
    for page in 1 $(((last + 1) / 2)) "$last"; do
      for order in relevance id; do : >"$work/$order"; done
      for r in $(seq 0 "$rounds"); do
        for order in relevance id; do
          sort=; [ $order = id ] && sort='&sort=id'
          t=$(get "$search&page[size]=20&page[number]=$page$sort")
          [ "$r" = 0 ] || echo "$t" >>"$work/$order" # round 0 warms up
        done
      done
      python3 - "$engine" "$search" "$page" "$last" "$work/relevance" "$work/id" <<'PY'
import statistics, sys
engine, search, page, last, rel, by_id = sys.argv[1:]
median = lambda f: statistics.median(float(x) for x in open(f)) * 1000
r, i = median(rel), median(by_id)
print(f"{engine:<10} {search:<68} {page:>5}/{last:<5} {r:9.1f} {i:9.1f} {r / i:7.2f}")
PY
    done
  done
}

serve() {
  "$bin" serve --port 0 --database "$1" --token bench-token --log-level warn --compression off >"$work/server.log" 2>&1 &
  pid=$!
  base="http://127.0.0.1:$(port_of "$work/server.log")/v1"
}

stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

printf '%-10s %-68s %11s %9s %9s %7s\n' engine search page "best ms" "id ms" ratio
"$bin" generate --database "$work/coursed.db" "${shape[@]}" >/dev/null
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()' \
  "$work/coursed.db" "$fill"
serve "$work/coursed.db"
measure sqlite
stop

pgbin=$(python3 bench/pg.py bindir)
if [ -n "$no_pg" ] || [ -z "$pgbin" ]; then
  [ -n "$no_pg" ] || echo "no PostgreSQL server binaries: PostgreSQL skipped" >&2
  exit 0
fi
url=$(python3 bench/pg.py start "$work/pg" 2>/dev/null)
psql() { "$pgbin/psql" -X -qAt -v ON_ERROR_STOP=1 -d "$url" "$@"; }
"$bin" generate --database "$url" "${shape[@]}" >/dev/null
psql -c "$fill" -c "VACUUM ANALYZE chapters"
serve "$url"
# The fill's changes of word counts are folded by the server in the background: wait for them.
while [ "$(psql -c 'SELECT count(*) FROM search_changes')" != 0 ]; do sleep 2; done
measure postgres
stop

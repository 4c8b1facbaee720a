#!/usr/bin/env bash
# Power cuts at length: the power-cut tests (tests/api/powercut) run again and again with random
# seeds and many cuts each, until the time is up; any failure is reported with the seed and the
# command that reproduces it. The suite runs a short, seeded version of the same tests.
#
#   bench/powercut.sh [--minutes 60] [--cuts 40] [--only PATTERN] [--no-pg]
#
# --minutes  how long to go on (default 60)
# --cuts     cuts per test run (COURSED_POWERCUT_CUTS; default 40)
# --only     run only the power-cut tests whose name holds PATTERN (e.g. sqlite_single)
# --no-pg    leave out the PostgreSQL tests
#
# Needs FUSE (/dev/fuse; fuse3's fusermount3 when not root) and, for the PostgreSQL half, the
# server binaries (as the suite does). Exits 1 when any run failed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/.."

minutes=60 cuts=40 only="" pg=1
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --cuts) cuts=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --no-pg) pg=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

export COURSED_REQUIRE_FUSE=1 COURSED_REQUIRE_POSTGRES=1
cargo test --locked --test api --no-run 2>&1 | tail -1
# The tests that cut the power many times (a seed and a number of cuts apply to them).
mapfile -t tests < <(cargo test --locked --test api -- --list 2>/dev/null \
  | sed -n 's/^\(powercut::\(sqlite\|postgres\)_[a-z_]*\): test$/\1/p' \
  | grep -v -e durability_normal -e reaches_the_feed -e recovers_from \
  | { if [ $pg = 0 ]; then grep -v '^powercut::postgres_'; else cat; fi; } \
  | { if [ -n "$only" ]; then grep -- "$only"; else cat; fi; })
[ ${#tests[@]} -gt 0 ] || { echo "no power-cut test matches" >&2; exit 2; }
echo "power-cut tests: ${tests[*]}"

log=$(mktemp -d)
deadline=$(( $(date +%s) + minutes * 60 ))
runs=0 failed=0 total=0
declare -A per_test
while [ "$(date +%s)" -lt $deadline ]; do
  # Each pass in another order: a short run still meets tests of both engines.
  for t in $(printf '%s\n' "${tests[@]}" | shuf); do
    [ "$(date +%s)" -lt $deadline ] || break
    seed=$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ))
    out="$log/run-$runs.log"
    if COURSED_POWERCUT_SEED=$seed COURSED_POWERCUT_CUTS=$cuts \
        cargo test --locked --test api -- --exact "$t" --nocapture >"$out" 2>&1; then
      status=ok
    else
      status=FAILED
      failed=$((failed + 1))
      echo "FAILED: $t with seed $seed (log: $out)"
      echo "  reproduce: COURSED_POWERCUT_SEED=$seed COURSED_POWERCUT_CUTS=$cuts cargo test --test api -- --exact $t --nocapture"
      grep -m3 -A3 "panicked" "$out" | sed 's/^/  /'
    fi
    n=$(grep -c '^cut [0-9]*: at' "$out" || true)
    total=$((total + n))
    per_test[$t]=$(( ${per_test[$t]:-0} + n ))
    runs=$((runs + 1))
    [ $status = ok ] && rm -f "$out"
  done
done
echo
echo "power cuts: $total cuts in $runs runs, $failed failed"
for t in "${tests[@]}"; do printf '  %-95s %6d cuts\n' "$t" "${per_test[$t]:-0}"; done
[ $failed -eq 0 ]

#!/usr/bin/env bash
# W1-W5 of this working tree against another revision, in the same run, on SQLite and (when
# PostgreSQL's server binaries are installed) PostgreSQL: each round runs the other revision's
# server right before this one's on a fresh copy of the same data, and the report gives
# this / before per workload with the target of a change: at most 5 % slower. Then, on PostgreSQL,
# bench/pgstatements.py replays each revision's statements of W1, W4 and W5 by pgbench alone.
#
#   bench/before-after.sh REV [bench.py arguments, e.g. --rounds 3 --no-pg]
#
# The other revision is built (release) in a worktree of its own under $BENCH_WORK.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
REV=${1:?usage: bench/before-after.sh REV [bench.py arguments]}
shift
WORK=${BENCH_WORK:-/tmp/coursed-bench}
BEFORE="$WORK/before-$(git -C "$REPO" rev-parse --short "$REV")"
# The data is made by the other revision (an older coursed refuses a newer schema): a work
# folder of its own, apart from the other benchmarks' data.
export BENCH_WORK="$BEFORE/work"

if ! command -v wrk >/dev/null; then
  echo "installing wrk" >&2
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk >/dev/null
fi
if [ ! -x "$BEFORE/target/release/coursed" ]; then
  mkdir -p "$WORK"
  # A worktree whose folder was deleted (a cleaned /tmp) is still registered: forget it first.
  git -C "$REPO" worktree prune
  [ -d "$BEFORE/src" ] || git -C "$REPO" worktree add --detach "$BEFORE/src" "$REV"
  (cd "$BEFORE/src" && CARGO_TARGET_DIR="$BEFORE/target" cargo build --locked --release)
fi
cd "$REPO"
cargo build --locked --release --bin coursed --example store_alone
status=0
python3 "$HERE/bench.py" --no-peers --no-scale --workloads W1,W2,W3,W4,W5 \
  --servers coursed-before,coursed,coursed-before-pg,coursed-pg \
  --baseline "$BEFORE/target/release/coursed" "$@" || status=$?
# What PostgreSQL alone does with each revision's statements (the share of a change that is the
# database's own work), unless SQLite only was asked for. The exit status is the benchmark's.
case " $* " in *" --no-pg "*) exit $status ;; esac
if [ -n "$(python3 "$HERE/pg.py" bindir)" ]; then
  python3 "$HERE/pgstatements.py" --before "$BEFORE/target/release/coursed" --now "$REPO/target/release/coursed"
fi
exit $status

#!/usr/bin/env bash
# The coursed benchmark, in one command:
#
#   bench/run.sh            W1-W5 on coursed, the limit and the peer (when ../shared/bench is
#                           there), 2 rounds, plus the 1,000,000-subject scale run
#   bench/run.sh --smoke    a tiny dataset, 1 s per workload, coursed only (what CI runs)
#
# It builds coursed, installs wrk if it is missing (Debian's package), then runs bench/bench.py
# with the remaining arguments (--rounds N, --no-peers, --no-scale, --duration 10s, ...).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)

PROFILE=release
for a in "$@"; do
  if [ "$a" = --smoke ]; then PROFILE=debug; fi
done

if ! command -v wrk >/dev/null; then
  echo "installing wrk" >&2
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk >/dev/null
fi

cd "$REPO"
if [ "$PROFILE" = release ]; then
  cargo build --locked --release --bin coursed --example store_alone
else
  cargo build --locked --bin coursed --example store_alone
fi
exec python3 "$HERE/bench.py" --profile "$PROFILE" "$@"

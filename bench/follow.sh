#!/usr/bin/env bash
# Following a district (bench/follow.py): how fast a follower catches up (target >= 5,000
# revisions/s) and how far behind it lags at 500 creates/s (target p99 <= 2 s), on SQLite and
# PostgreSQL.
#
#   bench/follow.sh [--rounds 3] [--no-pg] [--rate 500] [--seconds 20]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/.."
cargo build --locked --release --bin coursed --example webhook_load
python3 "$HERE/follow.py" "$@"

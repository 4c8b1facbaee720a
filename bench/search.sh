#!/usr/bin/env bash
# Search at scale on the generated 1,000,000-subject catalogue, both engines: see bench/search.py.
#   bench/search.sh [--no-pg] [--modules N --subjects-per-module N] [--requests N] [--w4-seconds N]
set -euo pipefail
cd "$(dirname "$0")/.."
# Timings are only worth something on a quiet machine: wait for a benchmark run to end.
while pgrep -f bench.py >/dev/null; do echo "waiting for a running bench.py to end" >&2; sleep 30; done
cargo build --release --locked --quiet
exec python3 bench/search.py "$@"

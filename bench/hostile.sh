#!/usr/bin/env bash
# Hostile requests against coursed, each beside its benign twin, and what they do to other
# clients meanwhile (see bench/hostile.py):
#
#   bench/hostile.sh            a generated catalogue of 150,000 chapters, on SQLite and, when
#                               PostgreSQL's server binaries are installed, on a throwaway cluster
#   bench/hostile.sh --smoke    a tiny catalogue, small payloads, a few iterations: a check that
#                               the script runs (quick enough for CI)
#   bench/hostile.sh --no-pg    SQLite only
#
# Other arguments go to bench/hostile.py (--iterations N, --timeout S, --only TEXT, ...). It
# builds coursed first (release; debug for --smoke, as bench/run.sh), and exits 0 whatever the
# targets say: the last line of the report says how many were met.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
for a in "$@"; do
  if [ "$a" = --smoke ]; then profile=debug; fi
done
if [ "$profile" = release ]; then
  cargo build --locked --release
else
  cargo build --locked
fi
exec python3 bench/hostile.py --profile "$profile" "$@"

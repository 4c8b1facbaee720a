#!/usr/bin/env bash
# What the access log costs: W1 with the log on, written to a file (A), against the log off
# (B), on the same binary and catalogue (see bench/w1-pair.sh).
#
#   bench/access-log.sh            (BIN=target/release/coursed ROUNDS=3 DURATION=10s)
set -euo pipefail
after_rounds() {
  echo "access log lines written by A: $(grep -c ' access ' "$1/a.log" || true)"
}
. "$(dirname "$0")/w1-pair.sh" "--log-level info" "--log-level info --access-log off"

#!/usr/bin/env bash
# What the metrics cost: W1 with --metrics-listen on and /metrics scraped every second (A),
# against no metrics (B), the access log off in both, on the same binary and catalogue (see
# bench/w1-pair.sh). The target: A / B >= 0.97.
#
#   bench/metrics.sh               (BIN=target/release/coursed ROUNDS=3 DURATION=10s)
set -euo pipefail
during_rounds() {
  local at
  at=$(grep -o 'metrics on http://[^ ]*' "$1/a.out" | sed 's/metrics on //')
  while curl -sf -o "$1/scraping" "$at" && mv "$1/scraping" "$1/scraped"; do sleep 1; done
}
after_rounds() {
  echo "requests A counted by its metrics: $(awk '/^coursed_http_requests_total/ {s += $NF} END {print s}' "$1/scraped")"
}
. "$(dirname "$0")/w1-pair.sh" "--access-log off --metrics-listen 127.0.0.1:0" "--access-log off"

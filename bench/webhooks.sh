#!/usr/bin/env bash
# Webhooks under load (bench/webhooks.py): W4 and W5 with 3 webhooks against without, and the
# delivery lag at 500 creates/s, on SQLite and PostgreSQL.
#
#   bench/webhooks.sh [--rounds 2] [--no-pg] [--rate 500] [--seconds 20] [--database-core]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/.."
if ! command -v wrk >/dev/null; then
  echo "installing wrk" >&2
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk >/dev/null
fi
cargo build --locked --release --bin coursed --example webhook_load
python3 "$HERE/webhooks.py" "$@"

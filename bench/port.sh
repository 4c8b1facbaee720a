# Sourced by the shell benchmarks. `port_of FILE` prints the port of the readiness line that
# `coursed serve --port 0` writes into FILE, waiting for it up to 60 s; fails without it.
port_of() {
  local port
  for _ in $(seq 1 600); do
    port=$(grep -so 'listening on http://[0-9.:]*' "$1" | sed 's/.*://') || true
    [ -n "$port" ] && { echo "$port"; return 0; }
    sleep 0.1
  done
  return 1
}

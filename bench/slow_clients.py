#!/usr/bin/env python3
"""A real client against coursed while thousands of slow and idle clients hold connections.

    bench/slow_clients.py [--bin target/release/coursed] [--slow 3000] [--idle 1000] [--seconds 10]
                          [--serve-args '--max-connections 1024 ...'] [--no-limits] [--server-fd-limit 1024]

On a generated catalogue (10 modules x 100 subjects) served from SQLite, a real client reads
random subjects for `--seconds`, twice: alone, then while attackers hold `--slow` connections that
send a request head one header line a second and never finish it, and `--idle` connections that
make one request and then say nothing; every attacker connection the server closes is opened
again at once (the strongest form of the attack). The real client is measured two ways: a new
connection per request (a browser's first visit) and one keep-alive connection. Reported: its
requests, failures, latency (p50, p99, max), and the server's open descriptors and memory.

`--no-limits` serves with limits so large they never act (what coursed did before it had them),
for comparison; `--server-fd-limit 1024` starts the server with the soft limit of open files that
a shell or a systemd service has by default (coursed raises it as far as its cap needs). The attackers run in a child process; only the standard library is used.
"""
import argparse
import asyncio
import http.client
import multiprocessing
import os
import random
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TOKEN = "bench-token"
NO_LIMITS = ["--max-connections", "1000000", "--header-timeout", "1d", "--idle-timeout", "1d"]


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def start(binary, database, extra, fd_limit):
    def limit():
        if fd_limit:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    proc = subprocess.Popen([binary, "serve", "--port", "0", "--database", database, "--token", TOKEN,
                             "--log-level", "warn", *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, preexec_fn=limit)
    for line in proc.stdout:
        if "listening on http://" in line:
            return proc, int(line.rsplit(":", 1)[1].split("/")[0])
    raise SystemExit("coursed did not start")


def server_state(pid):
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    return fds, rss // 1024


# --- the attackers (a child process) -------------------------------------------------------

async def connect(port, opened):
    """A new connection, tried again until one opens."""
    while True:
        try:
            connection = await asyncio.open_connection("127.0.0.1", port)
            opened.value += 1
            return connection
        except OSError:
            await asyncio.sleep(0.1)


async def slow_one(port, opened):
    while True:
        reader, writer = await connect(port, opened)
        try:
            writer.write(b"GET /v1/subjects HTTP/1.1\r\nHost: localhost\r\n")
            i = 0
            while True:
                await writer.drain()
                try:
                    # The server closing the connection ends the read at once.
                    if await asyncio.wait_for(reader.read(1024), 1.0) == b"":
                        break
                except asyncio.TimeoutError:
                    pass
                writer.write(f"X-Slow-{i}: 1\r\n".encode())
                i += 1
        except OSError:
            pass
        finally:
            writer.close()


async def idle_one(port, opened):
    while True:
        reader, writer = await connect(port, opened)
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            await writer.drain()
            while await reader.read(4096) != b"":
                pass
        except OSError:
            pass
        finally:
            writer.close()


def attack(port, slow, idle, opened):
    raise_fd_limit()

    async def main():
        tasks = [asyncio.create_task(slow_one(port, opened)) for _ in range(slow)]
        tasks += [asyncio.create_task(idle_one(port, opened)) for _ in range(idle)]
        await asyncio.gather(*tasks)

    asyncio.run(main())


# --- the real client -----------------------------------------------------------------------

def measure(port, ids, seconds, keep_alive, pid):
    latencies, failures, samples = [], 0, []
    stop = time.time() + seconds

    def sample():
        while time.time() < stop:
            samples.append(server_state(pid))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample)
    sampler.start()
    conn = None
    while time.time() < stop:
        started = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/v1/subjects/" + random.choice(ids), headers={"Authorization": f"Bearer {TOKEN}"})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise OSError(f"status {r.status}")
            latencies.append(time.perf_counter() - started)
        except (OSError, http.client.HTTPException):
            failures += 1
            conn = None
        if not keep_alive and conn is not None:
            conn.close()
            conn = None
    sampler.join()
    latencies.sort()
    ms = lambda q: 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")
    return {"requests": len(latencies) + failures, "failed": failures, "p50": ms(0.5), "p99": ms(0.99),
            "max": 1000 * latencies[-1] if latencies else float("nan"),
            "fds": max(s[0] for s in samples), "rss": max(s[1] for s in samples)}


def report(phase, mode, m):
    print(f"| {phase} | {mode} | {m['requests']} | {m['failed']} | {m['p50']:.2f} | {m['p99']:.2f} | "
          f"{m['max']:.1f} | {m['fds']} | {m['rss']} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/coursed")
    ap.add_argument("--slow", type=int, default=3000)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--serve-args", default="", help="more flags for coursed serve")
    ap.add_argument("--no-limits", action="store_true", help="limits so large they never act, for comparison")
    ap.add_argument("--server-fd-limit", type=int, default=0,
                    help="start the server with this soft limit of open files (1024: a shell's or systemd's default)")
    args = ap.parse_args()
    hard = raise_fd_limit()
    if hard < args.slow + args.idle + 100:
        raise SystemExit(f"the descriptor limit ({hard}) is too low for {args.slow + args.idle} attackers")
    extra = (NO_LIMITS if args.no_limits else []) + shlex.split(args.serve_args)
    with tempfile.TemporaryDirectory() as work:
        db = os.path.join(work, "slow.db")
        subprocess.run([args.bin, "generate", "--database", db, "--modules", "10", "--subjects-per-module", "100",
                        "--chapters-per-subject", "2", "--ids-dir", work], check=True, stdout=subprocess.DEVNULL)
        ids = [l.strip() for l in open(os.path.join(work, "subject_ids.txt")) if l.strip()]
        server, port = start(args.bin, db, extra, args.server_fd_limit)
        try:
            print(f"coursed serve {' '.join(extra) or '(default limits)'}; attackers: {args.slow} slow heads, "
                  f"{args.idle} idle keep-alive\n")
            print("| phase | client | requests | failed | p50 ms | p99 ms | max ms | server fds (max) | RSS MiB (max) |")
            print("|---|---|---|---|---|---|---|---|---|")
            for keep_alive in (False, True):
                report("alone", "keep-alive" if keep_alive else "new connection each",
                       measure(port, ids, args.seconds, keep_alive, server.pid))
            # Connections opened by the attackers (reopened ones included); not shared by a lock,
            # only one process writes it.
            opened = multiprocessing.Value("l", 0, lock=False)
            attackers = multiprocessing.Process(target=attack, args=(port, args.slow, args.idle, opened), daemon=True)
            ramp = time.time()
            attackers.start()
            while opened.value < args.slow + args.idle and time.time() - ramp < 30:
                time.sleep(0.1)
            print(f"(after {time.time() - ramp:.1f} s the attackers had opened {opened.value} connections; "
                  f"server fds now {server_state(server.pid)[0]})")
            for keep_alive in (False, True):
                report("under attack", "keep-alive" if keep_alive else "new connection each",
                       measure(port, ids, args.seconds, keep_alive, server.pid))
            attackers.terminate()
            attackers.join()
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()

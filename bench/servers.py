"""Starting, probing and stopping the servers under test (coursed, the limit, the peer)."""
import os
import signal
import subprocess
import sys
import threading
import time

from workloads import BASE, TOKEN


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, **kw):
    log("$", " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


class Server:
    def __init__(self, name, argv, port=None, env=None, ready_line=None, workloads=BASE, prepare=None,
                 db_ticks=None):
        self.name, self.argv, self.port, self.env = name, argv, port, env
        self.ready_line, self.workloads = ready_line, list(workloads)
        self.proc = None
        self.ready_ms = None
        # Called before each start (a fresh copy of the database), and the CPU of a database
        # server that is not a child of this one (PostgreSQL).
        self.prepare, self.db_ticks = prepare, db_ticks

    def start(self, logfile, probe=None, ready_within=120):
        self.log = open(logfile, "w")
        t0 = time.perf_counter()
        if self.ready_line:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                         env={**os.environ, **(self.env or {})})
            # A server that is neither ready nor gone by then is killed, which ends the read below.
            watchdog = threading.Timer(ready_within, self.proc.kill)
            watchdog.start()
            try:
                for line in self.proc.stdout:
                    if self.ready_line in line:
                        self.ready_ms = (time.perf_counter() - t0) * 1000
                        self.port = int(line.strip().rsplit(":", 1)[1].split("/")[0])
                        break
                else:
                    raise SystemExit(f"{self.name} exited or was not ready within {ready_within} s (see {logfile})")
            finally:
                watchdog.cancel()
        else:
            if port_in_use(self.port):
                raise SystemExit(f"port {self.port} is already in use: stop what listens there first")
            self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log,
                                         env={**os.environ, **(self.env or {})})
            wait_http(self, logfile, probe)
        return self

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def port_in_use(port):
    import socket
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_http(server, logfile, probe):
    """Waits until `probe` (a path every server serves) answers 200."""
    import urllib.request
    for _ in range(300):
        if server.proc.poll() is not None:
            raise SystemExit(f"{server.name} exited during start-up (see {logfile})")
        try:
            req = urllib.request.Request(server.url() + probe,
                                         headers={"Authorization": "Bearer " + TOKEN})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.1)
    raise SystemExit(f"{server.name} did not answer within 30 s (see {logfile})")

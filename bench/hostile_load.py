"""The client side of bench/hostile.py: one timed request, a series of a hostile request and its
twin, the pollers and the hostile clients of the interference phases, and the server's memory
sampled from /proc. Standard library only."""
import http.client
import multiprocessing
import socket
import statistics
import threading
import time
from collections import namedtuple

from hostile_cases import JSONAPI

# status: the HTTP status, "timeout" or "error"; seconds until the whole body was read.
Sample = namedtuple("Sample", "status size seconds")


class Client:
    """One keep-alive connection, opened again after a failure or a `Connection: close`. A
    request is encoded before its clock starts: what is timed is sending its bytes and reading
    the whole answer."""

    def __init__(self, port, tokens, timeout):
        self.port, self.tokens, self.timeout = port, tokens, timeout
        self.sock = None
        # Whether to keep the last answer's body (in `last_body`), for the set-up's reads.
        self.keep_body, self.last_body = False, None

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None

    def encode(self, method, path, body, headers, token):
        h = {"Host": f"127.0.0.1:{self.port}", "Accept": JSONAPI, "Accept-Encoding": "identity"}
        h.update(headers)
        if token:
            h["Authorization"] = "Bearer " + self.tokens[token]
        if body is not None:
            h["Content-Length"] = str(len(body))
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
        return head.encode("latin-1") + (body or b"")

    def send(self, method, path, body, headers, token):
        data = self.encode(method, path, body, headers, token)
        while True:
            fresh = self.sock is None
            started = time.perf_counter()
            try:
                if fresh:
                    self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
                try:
                    self.sock.sendall(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # answered (413, 431) before the request was all sent: read that answer
                r = http.client.HTTPResponse(self.sock, method=method)
                r.begin()
                answer = r.read()
                if self.keep_body:
                    self.last_body = answer
                if r.will_close:
                    self.close()
                return Sample(r.status, len(answer), time.perf_counter() - started)
            except (socket.timeout, TimeoutError):
                self.close()
                return Sample("timeout", 0, time.perf_counter() - started)
            except (OSError, http.client.HTTPException):
                self.close()
                if fresh:
                    return Sample("error", 0, time.perf_counter() - started)
                # The server had closed the kept connection (after a 413, say): a new one, as
                # clients do.

    def req(self, r, i):
        body = r.body(i) if callable(r.body) else r.body
        return self.send(r.method, r.path, body, r.headers, r.token)


def series(client, pair, iterations, budget, alive):
    """The twin and the hostile request alternately, `iterations` times each; the hostile request
    is not sent again once it timed out, failed, or took `budget` seconds in all."""
    host, twin = [], []
    for i in range(iterations):
        twin.append(client.req(pair.twin, i))
        s = client.req(pair.hostile, i)
        host.append(s)
        if s.status in ("timeout", "error") or sum(x.seconds for x in host) > budget or not alive():
            break
    return host, twin


def summary(samples):
    ms = sorted(s.seconds * 1000 for s in samples)
    statuses = sorted({str(s.status) for s in samples})
    return {"n": len(ms), "median_ms": statistics.median(ms), "max_ms": ms[-1], "status": "/".join(statuses),
            "size": samples[-1].size, "timeouts": sum(s.status == "timeout" for s in samples)}


# ---------- interference ----------

def percentiles(lat):
    lat = sorted(lat)
    if not lat:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    at = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    return {"n": len(lat), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": lat[-1] * 1000}


def poll(port, token, subject, seconds, timeout=10):
    """`GET /healthz` and `GET /v1/subjects/{id}`, each on its own keep-alive connection in a
    thread of its own, back to back for `seconds`; a request that fails or times out counts with
    the time it took (a lower bound of what a client would have waited)."""
    paths = {"healthz": ("/healthz", None), "subject": (f"/v1/subjects/{subject}", "write")}
    out = {}

    def one(name, path, tok):
        c = Client(port, {"write": token}, timeout)
        lat, failed, end = [], 0, time.time() + seconds
        while time.time() < end:
            s = c.send("GET", path, None, (), tok)
            lat.append(s.seconds)
            failed += s.status != 200
        c.close()
        out[name] = {**percentiles(lat), "failed": failed}

    threads = [threading.Thread(target=one, args=(n, p, t)) for n, (p, t) in paths.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _attacker(port, tokens, requests, offset, stop, done, timeouts, timeout):
    c = Client(port, tokens, timeout)
    k = offset
    while not stop.is_set():
        s = c.send(*requests[k % len(requests)])
        k += 1
        with done.get_lock():
            done.value += 1
        if s.status == "timeout":
            with timeouts.get_lock():
                timeouts.value += 1


def attack(port, tokens, requests, clients, seconds, during, timeout):
    """`clients` processes send `requests` (method, path, body, headers, token) in a loop, each
    from its own place in the list, for `seconds`, while `during()` runs in this process (the
    pollers); then they are ended. Returns what `during` returned, requests completed, timeouts."""
    ctx = multiprocessing.get_context("fork")
    stop, done, timeouts = ctx.Event(), ctx.Value("l", 0), ctx.Value("l", 0)
    procs = [ctx.Process(target=_attacker, daemon=True,
                         args=(port, tokens, requests, k * len(requests) // clients, stop, done, timeouts, timeout))
             for k in range(clients)]
    for p in procs:
        p.start()
    result = during()
    stop.set()
    for p in procs:
        p.join(2)
        if p.is_alive():
            p.terminate()  # waiting on a request the server has not answered yet
            p.join()
    return result, done.value, timeouts.value


# ---------- memory ----------

class Memory:
    """The server's memory from /proc, sampled every 20 ms: its private memory (RssAnon: what
    requests allocate) and its resident set (VmRSS, and VmHWM on demand), which on SQLite also
    counts the pages of the database file it maps (page cache, shared and reclaimable). Keeps
    the peaks, and what was running when the private one was reached."""

    def __init__(self):
        self.pid, self.label = None, "start"
        self.peak_rss_kib, self.peak_anon_kib, self.peak_at = 0, 0, None
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _read(self, *fields):
        found = dict.fromkeys(fields, 0)
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    key = line.split(":", 1)[0]
                    if key in found:
                        found[key] = int(line.split()[1])
        except (OSError, TypeError):
            pass
        return found

    def sample(self, rss_field="VmRSS"):
        got = self._read(rss_field, "RssAnon")
        self.peak_rss_kib = max(self.peak_rss_kib, got[rss_field])
        if got["RssAnon"] > self.peak_anon_kib:
            self.peak_anon_kib, self.peak_at = got["RssAnon"], self.label

    def high_water(self):
        """Reads VmHWM (before a server stops: it holds peaks between samples)."""
        self.sample("VmHWM")

    def _run(self):
        while not self._stop.wait(0.02):
            if self.pid:
                self.sample()

    def close(self):
        self._stop.set()

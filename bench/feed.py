#!/usr/bin/env python3
"""Reads the whole change feed of a server by pages of 1,000 over one keep-alive connection and
prints revisions per second (the target: 20,000 to one client). Run by bench/stream.sh.

    bench/feed.py http://HOST:PORT/v1 TOKEN"""
import http.client, sys, time, urllib.parse

api, token = sys.argv[1], sys.argv[2]
u = urllib.parse.urlsplit(api)
conn = http.client.HTTPConnection(u.hostname, u.port)
headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.api+json"}
path = f"{u.path}/revisions?page%5Bsize%5D=1000"
total, pages, started = 0, 0, time.perf_counter()
while True:
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"{path}: {r.status} {body[:200]!r}")
    # Counted without parsing the page: a quote inside a JSON string is escaped, so these
    # substrings are members, not text.
    n = body.count(b'"type":"revisions"')
    total += n
    pages += 1
    if n == 0:
        break
    at = body.rfind(b'"next":"')
    nxt = urllib.parse.urlsplit(body[at + 8:body.index(b'"', at + 8)].decode())
    path = f"{nxt.path}?{nxt.query}"
elapsed = time.perf_counter() - started
print(f"feed: {total} revisions in {pages} pages, {elapsed:.2f} s: {total / elapsed:.0f} revisions/s to one client")

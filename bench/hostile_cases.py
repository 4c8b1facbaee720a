"""The hostile requests of bench/hostile.py, each beside its benign twin: the same kind of request
of ordinary size. A request is built once (its bytes are sent as they are at every iteration),
except the bodies of writes, which carry the iteration number so that no two are alike."""
import json
import urllib.parse
from collections import namedtuple

JSONAPI = "application/vnd.api+json"
ATOMIC = JSONAPI + '; ext="https://jsonapi.org/ext/atomic"'

# One request: `body` is None, bytes, or a function of the iteration number giving bytes;
# `token` names the token it is sent with ("read": a database token of scope read, what a
# student holds; "write": a configured token, what an editor holds; None: no Authorization).
Req = namedtuple("Req", "method path body headers token", defaults=(None, (), "read"))
# A hostile request and its twin. `per_op`: (hostile operations, twin operations) when the ratio
# that the targets judge is per operation; `group`: what part of the review it answers.
Pair = namedtuple("Pair", "group name hostile twin per_op", defaults=(None,))

# Hostile HTML contents, by name: what they repeat, and how the search marker is placed.
VARIANTS = {
    "amp": "&",
    "lt": "<",
    "amphash": "&#",
    "combining": "\u0301",  # after one letter
    "open-tag": "<a ",
}


def q(s):
    """A query value percent-encoded, but for commas (a long list stays under the server's
    65,535 bytes of request target)."""
    return urllib.parse.quote(s, safe=",")


def marker(variant, i):
    """The word a hostile module's content starts with: its search handle (one word)."""
    return "zq" + variant.replace("-", "") + str(i)


def hostile_content(variant, size, i):
    """`size` bytes of content: the marker's paragraph, then the hostile run."""
    head = f"<p>{marker(variant, i)}</p>"
    if variant == "words":
        # 100,000 one-letter words (fewer when `size` is smaller than their 200,000 bytes).
        return head + "a " * min(100_000, (size - len(head)) // 2)
    if variant == "combining":
        return head + "a" + VARIANTS[variant] * ((size - len(head) - 1) // 2)
    unit = VARIANTS[variant]
    return head + unit * ((size - len(head)) // len(unit))


PROSE = ("<p>Light travels in straight lines until it meets a surface; there it is <b>reflected</b>, "
         "absorbed or <i>refracted</i>, and the angle of incidence equals the angle of reflection. "
         "Students measure both with a protractor &amp; a torch, and note what they see.</p> "
         "<h2>Lenses</h2><p>A convex lens brings parallel rays to a focus; its focal length depends on the "
         "curvature of its faces and on the glass. Caf&eacute; windows, spectacles and cameras all use them.</p> ")


def prose(size, i):
    """`size` bytes of ordinary prose HTML, starting with a search marker paragraph."""
    head = f"<p>{marker('prose', i)}</p>"
    body = PROSE * (size // len(PROSE) + 1)
    return head + body[:size - len(head)]


def module_doc(content, i, id_=None):
    data = {"type": "modules", "attributes": {"title": f"Hostile bench {i}", "content": content}}
    if id_:
        data["id"] = id_
    return json.dumps({"data": data}, ensure_ascii=False).encode()


def atomic_doc(contents, i):
    ops = [{"op": "add", "data": {"type": "modules", "attributes": {"title": f"Atomic bench {i}.{k}", "content": c}}}
           for k, c in enumerate(contents)]
    return json.dumps({"atomic:operations": ops}, ensure_ascii=False).encode()


def atomic_to_size(unit, total, i):
    """An atomic request adding two modules whose contents repeat the one-byte `unit` (or are
    prose, for `None`), so that the whole body is exactly `total` bytes."""
    def doc(n, m):
        if unit is None:
            return atomic_doc([prose(n, 2 * i), prose(m, 2 * i + 1)], i)
        return atomic_doc([unit * n, unit * m], i)
    room = total - len(atomic_doc(["", ""], i))
    body = doc(room // 2, room - room // 2)
    assert len(body) == total, (len(body), total)
    return body


def create_subjects_doc(n, module, i):
    ops = [{"op": "add", "data": {"type": "subjects",
                                  "attributes": {"title": f"Bulk {i}.{k}", "introduction": "Intro", "content": "Text"},
                                  "relationships": {"module": {"data": {"type": "modules", "id": module}}}}}
           for k in range(n)]
    return json.dumps({"atomic:operations": ops}).encode()


def pairs(ctx):
    """Every hostile request with its twin. `ctx`: the catalogue (ids, last pages, the common
    word) and the sizes (`size`: the content of a hostile module; `limit`: the body limit)."""
    size, limit, smoke = ctx.size, ctx.limit, ctx.smoke
    ct = (("Content-Type", JSONAPI),)
    at = (("Content-Type", ATOMIC), ("Accept", ATOMIC))
    post = lambda content: Req("POST", "/v1/modules", content, ct, "write")
    patch = lambda content: Req("PATCH", f"/v1/modules/{ctx.patch_module}", content, ct, "write")
    out = []
    # Pathological module contents: create, update, inside an atomic request.
    for v in list(VARIANTS) + ["words"]:
        hostile = lambda i, v=v: module_doc(hostile_content(v, size, i), i)
        n = len(hostile_content(v, size, 0).encode())
        benign = lambda i, n=n: module_doc(prose(n, i), i)
        out.append(Pair("content", f"POST module, content {v}", post(hostile), post(benign)))
        out.append(Pair("content", f"PATCH module, content {v}",
                        patch(lambda i, v=v: module_doc(hostile_content(v, size, i + 50), i, ctx.patch_module)),
                        patch(lambda i, n=n: module_doc(prose(n, i + 50), i, ctx.patch_module))))
    out.append(Pair("content", "atomic add module, content amp",
                    Req("POST", "/v1/operations", lambda i: atomic_doc([hostile_content("amp", size, i + 100)], i), at, "write"),
                    Req("POST", "/v1/operations", lambda i: atomic_doc([prose(size, i + 100)], i), at, "write")))
    for label, total in (("under", limit - 1024), ("at", limit)):
        out.append(Pair("content", f"atomic body of amp, {label} the limit ({total} B)",
                        Req("POST", "/v1/operations", lambda i, t=total: atomic_to_size("&", t, i), at, "write"),
                        Req("POST", "/v1/operations", lambda i, t=total: atomic_to_size(None, t, i), at, "write")))
    out.append(Pair("content", f"atomic body over the limit ({limit + 1} B)",
                    Req("POST", "/v1/operations", lambda i: atomic_to_size("&", limit + 1, i), at, "write"),
                    Req("POST", "/v1/operations", lambda i: atomic_doc([prose(1024, i)], i), at, "write")))
    # Searches whose excerpts reach the stored hostile contents (see hostile.py: store_for_search).
    for v in list(VARIANTS) + ["words"]:
        words = f"{ctx.search_marker(v)} a" if v == "words" else ctx.search_marker(v)
        out.append(Pair("search", f"search excerpt of a {ctx.search_size >> 10} KiB content {v}",
                        Req("GET", f"/v1/modules?filter%5Bsearch%5D={q(words)}"),
                        Req("GET", f"/v1/modules?filter%5Bsearch%5D={q(ctx.search_marker('prose'))}")))
    # A word most chapters hold: best match first against sort=id, page 1, a middle one, the last.
    w = q(ctx.word)
    for label, page in (("page 1", 1), (f"page {ctx.word_mid}", ctx.word_mid), (f"last page {ctx.word_last}", ctx.word_last)):
        base = f"/v1/chapters?filter%5Bsearch%5D={w}&page%5Bnumber%5D={page}"
        out.append(Pair("search", f"chapters search '{ctx.word}' best match, {label}", Req("GET", base),
                        Req("GET", base + "&sort=id")))
    out.append(Pair("search", f"subjects search '{ctx.subject_word}', last page {ctx.subject_word_last}",
                    Req("GET", f"/v1/subjects?filter%5Bsearch%5D={q(ctx.subject_word)}&page%5Bnumber%5D={ctx.subject_word_last}"),
                    Req("GET", f"/v1/subjects?filter%5Bsearch%5D={q(ctx.subject_word)}")))
    out.append(Pair("search", "chapters search, 8 prefixes", Req("GET", "/v1/chapters?filter%5Bsearch%5D="
                    + q("co* mo* su* ch* le* st* te* pr*")), Req("GET", "/v1/chapters?filter%5Bsearch%5D=" + q("co*"))))
    # include, fields, sort, filters: what the query can ask for.
    out.append(Pair("include", "modules, 100 a page, include=subjects.chapters",
                    Req("GET", "/v1/modules?page%5Bsize%5D=100&include=subjects.chapters"),
                    Req("GET", "/v1/modules?page%5Bsize%5D=100")))
    out.append(Pair("include", "subjects, 100 a page, include=module.subjects,chapters",
                    Req("GET", "/v1/subjects?page%5Bsize%5D=100&include=module.subjects%2Cchapters"),
                    Req("GET", "/v1/subjects?page%5Bsize%5D=100")))
    out.append(Pair("include", "include of 3,500 repeated paths",
                    Req("GET", "/v1/subjects?include=" + ",".join(["module.subjects"] * 3500)),
                    Req("GET", "/v1/subjects?include=module")))
    out.append(Pair("include", "include 3 levels deep (refused)", Req("GET", "/v1/subjects?include=module.subjects.chapters"),
                    Req("GET", "/v1/subjects?include=module")))
    out.append(Pair("query", "fields[subjects] naming title 10,000 times",
                    Req("GET", "/v1/subjects?fields%5Bsubjects%5D=" + q(",".join(["title"] * 10000))),
                    Req("GET", "/v1/subjects?fields%5Bsubjects%5D=title")))
    n = 900 if smoke else 9000
    out.append(Pair("query", f"{n:,} unknown parameters",
                    Req("GET", "/v1/subjects?" + "&".join(f"{base36(k)}=1" for k in range(n))),
                    # The twin sends as many parameters (the work grows with what is sent).
                    Req("GET", "/v1/subjects?" + "&".join(["a0=1"] * n))))
    out.append(Pair("query", f"{n:,} repeats of one unknown parameter",
                    Req("GET", "/v1/subjects?" + "&".join(["a0=1"] * n)), Req("GET", "/v1/subjects?a0=1")))
    ids = ctx.subject_ids
    out.append(Pair("query", "filter[id] with 1,300 ids (over the 100 allowed)",
                    Req("GET", "/v1/subjects?filter%5Bid%5D=" + ",".join((ids * 1300)[:1300])),
                    Req("GET", "/v1/subjects?filter%5Bid%5D=" + ids[0])))
    out.append(Pair("query", "filter[id] with 100 ids, page size 100",
                    Req("GET", "/v1/subjects?page%5Bsize%5D=100&filter%5Bid%5D=" + ",".join((ids * 100)[:100])),
                    Req("GET", "/v1/subjects?filter%5Bid%5D=" + ids[0])))
    out.append(Pair("query", "subjects filter[available_for_courses]=false, last page",
                    Req("GET", f"/v1/subjects?filter%5Bavailable_for_courses%5D=false&page%5Bnumber%5D={ctx.unavailable_last}"),
                    Req("GET", "/v1/subjects?filter%5Bavailable_for_courses%5D=false")))
    page = lambda n: f"page%5Bnumber%5D={n}"
    out.append(Pair("paging", f"subjects, last page {ctx.subjects_last}",
                    Req("GET", "/v1/subjects?" + page(ctx.subjects_last)), Req("GET", "/v1/subjects")))
    out.append(Pair("paging", f"subjects sort=-title, last page {ctx.subjects_last}",
                    Req("GET", "/v1/subjects?sort=-title&" + page(ctx.subjects_last)), Req("GET", "/v1/subjects?sort=-title")))
    out.append(Pair("paging", f"chapters sort=-title, last page {ctx.chapters_last}",
                    Req("GET", "/v1/chapters?sort=-title&" + page(ctx.chapters_last)), Req("GET", "/v1/chapters?sort=-title")))
    out.append(Pair("paging", f"chapters sort=-title, middle page {ctx.chapters_last // 2}",
                    Req("GET", "/v1/chapters?sort=-title&" + page(ctx.chapters_last // 2)),
                    Req("GET", "/v1/chapters?sort=-title")))
    out.append(Pair("paging", f"chapters sort=position,-title (a first key of few values), page {ctx.chapters_last // 3}",
                    Req("GET", "/v1/chapters?sort=position%2C-title&" + page(ctx.chapters_last // 3)),
                    Req("GET", "/v1/chapters?sort=position%2C-title")))
    out.append(Pair("paging", "chapters sort of every field, middle page",
                    Req("GET", "/v1/chapters?sort=-updated_at%2Cposition%2C-title%2Ccreated_at&" + page(ctx.chapters_last // 2)),
                    Req("GET", "/v1/chapters?sort=title")))
    out.append(Pair("paging", "page[number] of 2^64 - 1", Req("GET", "/v1/subjects?page%5Bnumber%5D=18446744073709551615"),
                    Req("GET", "/v1/subjects")))
    # Writes of many things at once.
    m = ctx.module_ids[0]
    ops = 100 if smoke else 1000
    out.append(Pair("atomic", f"atomic, {ops} creates",
                    Req("POST", "/v1/operations", lambda i: create_subjects_doc(ops, m, i), at, "write"),
                    Req("POST", "/v1/operations", lambda i: create_subjects_doc(10, m, i), at, "write"), per_op=(ops, 10)))
    out.append(Pair("atomic", "atomic, 1,001 operations (refused)",
                    Req("POST", "/v1/operations", lambda i: create_subjects_doc(1001, m, i), at, "write"),
                    Req("POST", "/v1/operations", lambda i: create_subjects_doc(10, m, i), at, "write")))
    none = "00000000-0000-7000-8000-%012x"
    # Work that grows with what the request sends: compared per id named (as the creates above
    # per operation), and with a body of the same size.
    out.append(Pair("atomic", "relationship POST naming 10,000 absent subjects (per id)",
                    Req("POST", f"/v1/modules/{m}/relationships/subjects",
                        json.dumps({"data": [{"type": "subjects", "id": none % k} for k in range(10000)]}).encode(), ct, "write"),
                    Req("POST", f"/v1/modules/{m}/relationships/subjects",
                        json.dumps({"data": [{"type": "subjects", "id": none % 1}]}).encode(), ct, "write"),
                    per_op=(10000, 1)))
    unknown = json.dumps({"data": {"type": "modules", "attributes": {
        "title": "x", **{f"a{k}": 1 for k in range(50000)}}}}).encode()
    out.append(Pair("atomic", "POST module with 50,000 unknown attributes",
                    Req("POST", "/v1/modules", unknown, ct, "write"),
                    Req("POST", "/v1/modules", lambda i, n=len(unknown): module_doc(prose(n, i + 200), i), ct, "write")))
    out.append(Pair("atomic", "POST body nested 100,000 arrays deep",
                    Req("POST", "/v1/modules", b'{"data":' + b"[" * 100000 + b"]" * 100000 + b"}", ct, "write"),
                    Req("POST", "/v1/modules", b'{"data":[]}', ct, "write")))
    # Headers.
    s = f"/v1/subjects/{ids[0]}"
    out.append(Pair("headers", "X-Forwarded-For of 10,000 addresses",
                    Req("GET", s, None, (("X-Forwarded-For", ", ".join(f"10.0.{k // 256}.{k % 256}" for k in range(10000))),)),
                    Req("GET", s, None, (("X-Forwarded-For", "10.0.0.1"),))))
    out.append(Pair("headers", "99 header lines", Req("GET", s, None, tuple((f"X-Pad-{k}", "1") for k in range(95))),
                    Req("GET", s)))
    out.append(Pair("headers", "5,000 header lines (over the 100 allowed)",
                    Req("GET", s, None, tuple((f"X-Pad-{k}", "1") for k in range(5000))), Req("GET", s)))
    out.append(Pair("headers", "If-None-Match of 10,000 tags",
                    Req("GET", s, None, (("If-None-Match", ", ".join(f'"{k:016x}"' for k in range(10000))),)),
                    Req("GET", s, None, (("If-None-Match", '"0000000000000000"'),))))
    out.append(Pair("headers", "Accept of 10,000 media types",
                    Req("GET", s, None, (("Accept", ", ".join(f"application/x-{k}" for k in range(10000)) + ", " + JSONAPI),)),
                    Req("GET", s)))
    out.append(Pair("headers", "Accept-Encoding of 10,000 codings",
                    Req("GET", "/v1/subjects", None,
                        (("Accept-Encoding", ", ".join(f"x-{k};q=0.5" for k in range(10000)) + ", gzip"),)),
                    Req("GET", "/v1/subjects", None, (("Accept-Encoding", "gzip"),))))
    for p in out:
        for r in (p.hostile, p.twin):
            assert len(r.path) < 65535, (p.name, len(r.path))
    return out


def base36(k):
    """A short unique parameter name for `k`."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    name = ""
    while True:
        name = digits[k % 36] + name
        k //= 36
        if not k:
            return "p" + name

#!/usr/bin/env python3
"""What recording history costs SQLite itself, with no server: W5's writes (a subject's title
and its words changed) and W4's (a subject created with ~3 KB of text), run against a migrated
copy of the benchmark's data with the history triggers on, then off, in the same run, grouped
and synced as the server's writer does (groups of 16 in one transaction, synchronous=NORMAL in
WAL, one fdatasync of the WAL per group). Prints writes/s of each and the ratio.

    bench/history-alone.py DATABASE [--writes 20000] [--rounds 3]

DATABASE is a coursed SQLite file (copied first; the copy is migrated by `coursed` itself, so
run `coursed serve` or any command on it once, or pass a file already migrated)."""
import argparse, os, random, shutil, sqlite3, tempfile, time, uuid

p = argparse.ArgumentParser()
p.add_argument("database")
p.add_argument("--writes", type=int, default=20000)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--group", type=int, default=16)
args = p.parse_args()

TRIGGERS = ("subjects_revision_insert", "subjects_revision_update", "subjects_revision_delete")

def run(path, workload, history, seed):
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL")
    c.execute("PRAGMA foreign_keys=ON"); c.execute("PRAGMA temp_store=MEMORY")
    if not history:
        c.execute("UPDATE history_context SET recording = 0")
    ids = [r[0] for r in c.execute("SELECT id FROM subjects")]
    modules = [r[0] for r in c.execute("SELECT id FROM modules")]
    rnd = random.Random(seed)
    text = " ".join(rnd.choice(["algebra", "river", "history", "light", "cell", "verse"]) for _ in range(450))
    wal = open(path + "-wal", "rb") if os.path.exists(path + "-wal") else None
    started = time.perf_counter()
    done = 0
    while done < args.writes:
        c.execute("BEGIN IMMEDIATE")
        for _ in range(args.group):
            now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
            if workload == "W5":
                title = f"Title {rnd.random():.12f}"
                c.execute("UPDATE subjects SET title = ?, title_words = lower(?), updated_at = ? WHERE id = ? AND title IS NOT ?",
                          (title, title, now, rnd.choice(ids), title))
            else:
                title = f"New {rnd.random():.12f}"
                c.execute("INSERT INTO subjects (id, title, title_words, introduction, content, content_words, module_id, created_at, updated_at) "
                          "VALUES (?, ?, lower(?), ?, ?, ?, ?, ?, ?)",
                          (str(uuid.uuid4()), title, title, text[:300], text, text, rnd.choice(modules), now, now))
            done += 1
        c.execute("COMMIT")
        if wal is None and os.path.exists(path + "-wal"):
            wal = open(path + "-wal", "rb")
        if wal is not None:
            os.fdatasync(wal.fileno())
    elapsed = time.perf_counter() - started
    c.close()
    return done / elapsed

work = tempfile.mkdtemp(prefix="coursed-history-alone-")
try:
    results = {}
    for rnd_i in range(args.rounds):
        for workload in ("W4", "W5"):
            for history in (True, False):
                copy = os.path.join(work, "db.sqlite")
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(copy + suffix):
                        os.remove(copy + suffix)
                shutil.copy(args.database, copy)
                rate = run(copy, workload, history, seed=rnd_i)
                results.setdefault((workload, history), []).append(rate)
                print(f"round {rnd_i + 1} {workload} history {'on ' if history else 'off'}: {rate:8.0f} writes/s", flush=True)
    for workload in ("W4", "W5"):
        on, off = sorted(results[(workload, True)]), sorted(results[(workload, False)])
        med = lambda xs: xs[len(xs) // 2]
        print(f"{workload}: history on {med(on):.0f}/s, off {med(off):.0f}/s, ratio {med(on) / med(off):.3f} (median of {args.rounds})")
finally:
    shutil.rmtree(work, ignore_errors=True)

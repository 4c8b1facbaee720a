"""PostgreSQL for the benchmark: a throwaway cluster with production durability (fsync and
synchronous_commit on), the coursed and peer databases on it, and the CPU its server processes
use (they are not children of the server under test, so they are counted separately)."""
import glob
import os
import shutil
import socket
import subprocess
import sys
import time

from procs import cpu_ticks, ended_children_ticks

SETTINGS = """listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = ''
max_connections = 200
shared_buffers = 256MB
max_wal_size = 2GB
fsync = on
synchronous_commit = on
"""


def bindir():
    try:
        d = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        if d and os.path.exists(os.path.join(d, "postgres")):
            return d
    except OSError:
        pass
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    return dirs[-1] if dirs and os.path.exists(os.path.join(dirs[-1], "postgres")) else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """initdb into `root` (as the postgres user when run as root), started on a free port."""

    def __init__(self, root, log):
        self.bin, self.root, self.log = bindir(), root, log
        self.data = os.path.join(root, "data")
        self.as_pg = os.getuid() == 0
        self.port = None

    def _run(self, argv, **kw):
        if self.as_pg:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        return subprocess.run(argv, check=True, cwd="/", **kw)

    def start(self):
        if os.path.exists(self.root):
            shutil.rmtree(self.root)
        os.makedirs(self.root)
        if self.as_pg:
            shutil.chown(self.root, "postgres", "postgres")
        self._run([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres", "--auth=trust",
                   "-E", "UTF8", "--locale=C.UTF-8"], capture_output=True)
        self.port = free_port()
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(SETTINGS.format(port=self.port))
        self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.data, "server.log"),
                   "-w", "-t", "60", "start"], capture_output=True)
        self.log(f"PostgreSQL {self.version()} on port {self.port} (fsync and synchronous_commit on)")
        return self

    def stop(self):
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"],
                      capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, db="postgres"):
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}?sslmode=disable"

    def admin_url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def sql(self, statement, db="postgres"):
        return subprocess.run([os.path.join(self.bin, "psql"), "-X", "-qAt", "-v", "ON_ERROR_STOP=1",
                               "-d", f"postgres://postgres@127.0.0.1:{self.port}/{db}", "-c", statement],
                              check=True, capture_output=True, text=True).stdout.strip()

    def version(self):
        return self.sql("SHOW server_version").split()[0]

    def fresh(self, name, template):
        """Database `name` as a copy of `template` (dropped first, connections closed)."""
        self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.sql(f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY")

    def cpu_ticks(self):
        """User and system CPU of every process of the cluster: the postmaster and its children,
        those that have ended too (a client's backends that closed, autovacuum's workers)."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline())
            return cpu_ticks(pid) + ended_children_ticks(pid)
        except (OSError, ValueError):
            return 0


def main(argv):
    """For shell benchmarks: `pg.py start ROOT` starts a cluster in ROOT with an empty database
    `coursed` and prints its URL; `pg.py stop ROOT` stops it and removes ROOT; `pg.py bindir`
    prints where the server binaries are (nothing without them)."""
    log = lambda m: print(m, file=sys.stderr)
    if argv[:1] == ["bindir"]:
        print(bindir() or "")
    elif argv[:1] == ["start"] and len(argv) == 2:
        cluster = Cluster(argv[1], log).start()
        cluster.sql("CREATE DATABASE coursed")
        print(cluster.url("coursed"))
    elif argv[:1] == ["stop"] and len(argv) == 2:
        Cluster(argv[1], log).stop()
    else:
        raise SystemExit("usage: pg.py start ROOT | stop ROOT | bindir")


if __name__ == "__main__":
    main(sys.argv[1:])

//! Throwaway PostgreSQL servers for the tests: one shared server per test process (a fresh database per
//! test) and private clusters for tests that stop and restart theirs.
//!
//! Teardown needs no "after all tests" hook: each cluster has a watchdog `sh` whose stdin is a pipe held
//! by this process; when the process ends (however it ends) the pipe closes and the watchdog stops the
//! server and deletes its directory.

mod tests;

use std::io::Write;
use std::os::unix::{fs::MetadataExt, fs::PermissionsExt, process::CommandExt};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;

/// The shared throwaway server of this test process, started on first use; `None` when no
/// PostgreSQL can be had. With COURSED_TEST_POSTGRES=postgres://user@host:port/db set, that
/// server is used instead of starting one (fresh databases are created on it).
/// With COURSED_REQUIRE_POSTGRES=1 set (CI sets it), failing to get one panics with the reason
/// instead of returning None, so that the PostgreSQL half of the suite can never be skipped silently.
pub fn server() -> Option<&'static Server> {
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    let server = SERVER.get_or_init(|| match std::env::var("COURSED_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Server::external(&url),
        _ => Cluster::start(false).map(|cluster| Server { url: cluster.url("postgres"), _cluster: Some(cluster) }),
    });
    available(server.as_ref().map_err(String::clone))
}

/// A PostgreSQL server on which tests get fresh databases.
pub struct Server {
    /// URL of the database that CREATE DATABASE is run on.
    url: String,
    /// The local cluster, when we started one (kept alive, with its watchdog, for the whole process).
    _cluster: Option<Cluster>,
}

impl Server {
    /// Creates a new, empty database (unique name) and returns its URL, e.g.
    /// postgres://postgres@127.0.0.1:PORT/t_<hex>?sslmode=disable
    pub fn fresh_database(&self) -> String {
        fresh_database(&self.url)
    }

    fn external(url: &str) -> Result<Server, String> {
        sql(url, "SELECT 1").map_err(|e| format!("COURSED_TEST_POSTGRES: {e}"))?;
        Ok(Server { url: url.to_owned(), _cluster: None })
    }
}

/// A private cluster for tests that stop and restart the server; stopped and deleted on drop.
pub struct Private {
    cluster: Cluster,
}

impl Private {
    /// Starts a new cluster on a free port; `ssl` turns on TLS with a self-signed certificate
    /// (generated with the `openssl` command into the data directory; server.crt/server.key,
    /// key mode 0600 owned by the server user). `None` when PostgreSQL is unavailable (same
    /// COURSED_REQUIRE_POSTGRES rule as `server()`).
    pub fn start(ssl: bool) -> Option<Private> {
        available(Cluster::start(ssl)).map(|cluster| Private { cluster })
    }

    /// URL of database `postgres` on it (`?sslmode=disable` unless ssl, then no sslmode).
    pub fn url(&self) -> String {
        self.cluster.url("postgres")
    }

    /// Creates a new empty database and returns its URL (as Server::fresh_database).
    pub fn fresh_database(&self) -> String {
        fresh_database(&self.url())
    }

    /// A cluster that keeps its promises (fsync, full-page writes and synchronous commits on, as
    /// PostgreSQL ships), its directory under `parent` (the power-cut file system), and no Unix
    /// socket (TCP only). Start it after `initdb`'s files are made durable: see `sync_and_start`.
    pub fn init_durable_in(parent: &std::path::Path) -> Option<Private> {
        available(Cluster::start_in(false, parent, true)).map(|cluster| Private { cluster })
    }

    /// The power went: the postmaster and every process it started are killed at once (-9).
    pub fn crash(&self) {
        let postmaster = self.cluster.postmaster.lock().unwrap().take();
        let Some(pm) = postmaster else { return };
        // Stopped first, so that it forks nothing more; then its children, then itself.
        unsafe { libc::kill(pm, libc::SIGSTOP) };
        let mut all = children(pm);
        all.push(pm);
        for pid in &all {
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        // All gone before the disk is touched: none may write after the cut, and a process
        // still attached to the old shared memory, or a postmaster not yet reaped (alive to
        // `kill -0`), would keep the next start out.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while all.iter().any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists()) {
            assert!(std::time::Instant::now() < deadline, "PostgreSQL's processes {all:?} outlived SIGKILL");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// `pg_ctl stop -m fast` (waits until stopped).
    pub fn stop(&self) {
        self.cluster.pg_ctl(&["stop", "-w", "-m", "fast"]).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Starts it again on the same port (waits until it accepts connections).
    pub fn restart(&self) {
        self.cluster.pg_start().unwrap_or_else(|e| panic!("{e}"));
    }
}

/// `Some` when there is a server; else `None`, or a panic when COURSED_REQUIRE_POSTGRES=1.
fn available<T>(result: Result<T, String>) -> Option<T> {
    if let Err(reason) = &result {
        if std::env::var("COURSED_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
            panic!("PostgreSQL required (COURSED_REQUIRE_POSTGRES=1) but unavailable: {reason}");
        }
        static ONCE: OnceLock<()> = OnceLock::new();
        ONCE.get_or_init(|| eprintln!("PostgreSQL unavailable, its tests are skipped: {reason}"));
    }
    result.ok()
}

/// A cluster in its own temporary directory (`data/` and the socket), with its watchdog.
struct Cluster {
    bin: PathBuf,
    root: PathBuf,
    port: u16,
    ssl: bool,
    /// PostgreSQL's own durability settings (see `start_in`).
    durable: bool,
    /// The postmaster's pid, read when it started (for `Private::crash`).
    postmaster: std::sync::Mutex<Option<i32>>,
    /// initdb and pg_ctl refuse to run as root: then they run as the `postgres` user.
    as_postgres: bool,
    watchdog: Child,
    /// Its closing (drop, or this process ending) tells the watchdog to stop the server and delete `root`.
    pipe: Option<ChildStdin>,
}

impl Cluster {
    fn start(ssl: bool) -> Result<Cluster, String> {
        Cluster::start_in(ssl, &std::env::temp_dir(), false)
    }

    /// `durable`: PostgreSQL's own durability settings, no Unix socket, and not started (see
    /// `Private::init_durable_in`).
    fn start_in(ssl: bool, parent: &std::path::Path, durable: bool) -> Result<Cluster, String> {
        let bin = bindir().ok_or("no PostgreSQL server binaries (pg_config --bindir, /usr/lib/postgresql/*/bin)")?;
        let dir = tempfile::Builder::new().prefix("coursed-pg-").tempdir_in(parent);
        let root = dir.map_err(|e| format!("temp dir: {e}"))?.keep();
        let as_postgres = std::fs::metadata(&root).map_err(|e| format!("temp dir: {e}"))?.uid() == 0;
        let data = root.join("data");
        // The watchdog comes first so that whatever happens next, the directory goes away.
        let script = r#"cat >/dev/null; "$@" stop -m immediate -D "$DATA"; rm -rf "$ROOT""#;
        let mut watchdog = Command::new("sh");
        watchdog.args(["-c", script, "watchdog"]).env("DATA", &data).env("ROOT", &root);
        if as_postgres {
            watchdog.args(["runuser", "-u", "postgres", "--"]);
        }
        // Own process group: a ^C on the terminal must not kill it before the server is stopped.
        // Null stdout/stderr: it must not hold cargo's output pipes open.
        watchdog.arg(bin.join("pg_ctl")).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        let mut watchdog = watchdog.process_group(0).spawn().map_err(|e| {
            let _ = std::fs::remove_dir_all(&root);
            format!("watchdog: {e}")
        })?;
        let pipe = watchdog.stdin.take();
        let postmaster = std::sync::Mutex::new(None);
        let mut cluster = Cluster { bin, root, port: 0, ssl, durable, as_postgres, watchdog, pipe, postmaster };
        cluster.init()?;
        if durable {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("free port: {e}"))?;
            cluster.port = probe.local_addr().unwrap().port();
            return Ok(cluster);
        }
        // The free port may be taken between our probe and the server's bind: retry with another.
        let mut result = Err(String::new());
        for _ in 0..3 {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("free port: {e}"))?;
            cluster.port = probe.local_addr().unwrap().port();
            drop(probe);
            result = cluster.pg_start();
            if result.is_ok() {
                break;
            }
        }
        result.map(|()| cluster)
    }

    fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    fn url(&self, db: &str) -> String {
        let query = if self.ssl { "" } else { "?sslmode=disable" };
        format!("postgres://postgres@127.0.0.1:{}/{db}{query}", self.port)
    }

    /// initdb, settings for a fast throwaway server, and the certificate when `ssl`.
    fn init(&self) -> Result<(), String> {
        if self.as_postgres {
            run(Command::new("chown").arg("postgres:").arg(&self.root))?;
        }
        let data = self.data();
        let initdb = "-U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 --no-sync --no-instructions -D";
        run(self.command("initdb").args(initdb.split(' ')).arg(&data))?;
        let mut conf = if self.durable {
            "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 100\n".to_owned()
        } else {
            format!(
                "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nfsync = off\n\
                 synchronous_commit = off\nfull_page_writes = off\nmax_connections = 300\nshared_buffers = 64MB\n",
                self.root.display()
            )
        };
        if self.ssl {
            let (crt, key) = (data.join("server.crt"), data.join("server.key"));
            let mut openssl = Command::new("openssl");
            openssl.args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]);
            openssl.args(["-days", "3650", "-subj", "/CN=localhost"]);
            openssl.args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]);
            run(openssl.arg("-keyout").arg(&key).arg("-out").arg(&crt))?;
            std::fs::set_permissions(&key, PermissionsExt::from_mode(0o600)).map_err(|e| format!("{e}"))?;
            if self.as_postgres {
                run(Command::new("chown").arg("postgres:").arg(&key).arg(&crt))?;
            }
            conf.push_str("ssl = on\n");
        }
        let file = std::fs::OpenOptions::new().append(true).open(data.join("postgresql.conf"));
        file.and_then(|mut f| f.write_all(conf.as_bytes())).map_err(|e| format!("postgresql.conf: {e}"))
    }

    /// `pg_ctl start -w`: returns once the server accepts connections.
    /// The server's log: in its data directory, or beside the disk for a durable cluster (a
    /// power cut would take the lines that tell why it failed).
    fn log(&self) -> PathBuf {
        match self.durable {
            true => self.root.parent().and_then(|disk| disk.parent()).unwrap_or(&self.root).join("server.log"),
            false => self.data().join("server.log"),
        }
    }

    fn pg_start(&self) -> Result<(), String> {
        let log = self.log();
        if self.durable && self.as_postgres && !log.exists() {
            std::fs::write(&log, "").map_err(|e| format!("{}: {e}", log.display()))?;
            run(Command::new("chown").arg("postgres:").arg(&log))?;
        }
        self.pg_ctl(&["start", "-w", "-t", "60", "-o", &format!("-p {}", self.port), "-l", log.to_str().unwrap()])?;
        let pid = std::fs::read_to_string(self.data().join("postmaster.pid")).ok();
        *self.postmaster.lock().unwrap() = pid.and_then(|p| p.lines().next()?.trim().parse().ok());
        Ok(())
    }

    /// `pg_ctl ARGS -D data`; on failure, with the tail of the server log.
    fn pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        run(self.command("pg_ctl").args(args).arg("-D").arg(self.data())).map_err(|e| {
            let log = std::fs::read_to_string(self.log()).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            format!("{e}\n--- server.log (tail) ---\n{}", lines[lines.len().saturating_sub(20)..].join("\n"))
        })
    }

    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        if !self.as_postgres {
            return Command::new(program);
        }
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    }
}

impl Drop for Cluster {
    /// Closing the pipe makes the watchdog stop the server and delete the directory; wait for it.
    fn drop(&mut self) {
        drop(self.pipe.take());
        let _ = self.watchdog.wait();
    }
}

/// The processes whose parent is `pid`.
fn children(pid: i32) -> Vec<i32> {
    let Ok(all) = std::fs::read_dir("/proc") else { return Vec::new() };
    all.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // pid (comm) state ppid ...: the command may hold spaces and parentheses.
            let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
            after.split_whitespace().nth(1).and_then(|pp| pp.parse::<i32>().ok()) == Some(pid)
        })
        .collect()
}

/// The server binaries: `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin.
fn bindir() -> Option<PathBuf> {
    let has_initdb = |dir: &PathBuf| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    let out = Command::new("pg_config").arg("--bindir").output().ok().filter(|o| o.status.success());
    let configured = out.map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(dir) = configured.filter(has_initdb) {
        return Some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, dir)| has_initdb(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

/// Runs a command to completion (output captured, so nothing holds cargo's pipes); its stderr on failure.
fn run(command: &mut Command) -> Result<(), String> {
    let out = command.stdin(Stdio::null()).output().map_err(|e| format!("{command:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{command:?}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}

/// `CREATE DATABASE t_<hex>` through `admin_url`; the same URL with the new database's name.
fn fresh_database(admin_url: &str) -> String {
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let create = format!("CREATE DATABASE {name} TEMPLATE template0");
    with_client(admin_url, move |client| {
        // FILE_COPY (PostgreSQL 15+) measured fastest: a plain file copy, where the default WAL_LOG writes the
        // template twice (WAL and files). template0: nothing connects to it, so concurrent copies never conflict.
        let version: u32 = first_value(client, "SHOW server_version_num")?.unwrap_or_default().parse().unwrap_or(0);
        let strategy = if version >= 150000 { " STRATEGY FILE_COPY" } else { "" };
        client.batch_execute(&format!("{create}{strategy}"))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // Swap the path (the database) of the URL, keeping its query.
    let start = admin_url.find("://").map_or(0, |i| i + 3);
    let path = admin_url[start..].find('/').map_or(admin_url.len(), |i| start + i);
    let end = admin_url[path..].find('?').map_or(admin_url.len(), |i| path + i);
    format!("{}/{name}{}", &admin_url[..path], &admin_url[end..])
}

/// Runs `f` on a new connection, on a thread of its own: the sync client panics inside a tokio runtime.
fn with_client<T: Send + 'static>(
    url: &str,
    f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
) -> Result<T, String> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        // The postgres errors keep their cause (e.g. "Connection refused") in `source()`.
        let describe = |e: postgres::Error| match std::error::Error::source(&e) {
            Some(cause) => format!("{url}: {e}: {cause}"),
            None => format!("{url}: {e}"),
        };
        let mut client = postgres::Client::connect(&url, postgres::NoTls).map_err(describe)?;
        f(&mut client).map_err(describe)
    })
    .join()
    .expect("postgres client thread panicked")
}

/// The first column of the first row of `query`, if any.
fn first_value(client: &mut postgres::Client, query: &str) -> Result<Option<String>, postgres::Error> {
    Ok(client.simple_query(query)?.iter().find_map(|m| match m {
        postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
        _ => None,
    }))
}

/// `first_value` on a new connection.
pub fn sql(url: &str, query: &str) -> Result<Option<String>, String> {
    let query = query.to_owned();
    with_client(url, move |client| first_value(client, &query))
}

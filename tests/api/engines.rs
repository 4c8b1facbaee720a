//! The two storage engines in the tests: every test of the API runs on both. `on_both!(name);`
//! above `async fn name()` makes the tests `name::sqlite` and `name::postgres`, which run the
//! same body with [`crate::helpers::TestApp::new`] opening a fresh SQLite file or a fresh
//! PostgreSQL database (on the throwaway server of [`crate::pg_cluster`]).

use std::future::Future;

/// `on_both!(name)` runs `async fn name()` as the tests `name::sqlite` and `name::postgres`.
macro_rules! on_both {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                $crate::engines::Engine::Sqlite.run(super::$name()).await
            }
            #[tokio::test]
            async fn postgres() {
                $crate::engines::Engine::Postgres.run(super::$name()).await
            }
        }
    };
}
pub(crate) use on_both;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

tokio::task_local! {
    static ENGINE: Engine;
}

impl Engine {
    /// The engine of the running test (SQLite outside `on_both!`).
    pub fn current() -> Engine {
        ENGINE.try_with(|e| *e).unwrap_or(Engine::Sqlite)
    }

    /// Runs a test body on this engine; on PostgreSQL only when a server can be had (see
    /// [`crate::pg_cluster::server`], which makes CI fail instead of skipping).
    pub async fn run(self, body: impl Future<Output = ()>) {
        if self == Engine::Postgres && crate::pg_cluster::server().is_none() {
            eprintln!("no PostgreSQL server: the PostgreSQL run of this test is skipped");
            return;
        }
        ENGINE.scope(self, body).await
    }

    /// A fresh database of this engine: a file in `dir`, or a new PostgreSQL database.
    pub fn fresh_database(self, dir: &std::path::Path) -> String {
        match self {
            Engine::Sqlite => dir.join("test.db").to_str().unwrap().to_owned(),
            Engine::Postgres => crate::pg_cluster::server().expect("a PostgreSQL server").fresh_database(),
        }
    }

    /// Runs `sql` (statements without results) on `database` over a connection of its own.
    pub fn execute(self, database: &str, sql: &str) {
        match self {
            Engine::Sqlite => rusqlite::Connection::open(database).unwrap().execute_batch(sql).unwrap(),
            Engine::Postgres => {
                let (url, sql) = (database.to_owned(), sql.to_owned());
                // The synchronous client must not run on an async thread.
                std::thread::spawn(move || {
                    postgres::Client::connect(&url, postgres::NoTls).unwrap().batch_execute(&sql).unwrap()
                })
                .join()
                .unwrap();
            }
        }
    }
}

/// A lock held by another connection; see [`crate::helpers::TestApp::block_writes`].
pub enum Blocker {
    Sqlite(rusqlite::Connection),
    Postgres(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>),
}

impl Blocker {
    /// Takes the write lock of `database` on another connection.
    pub fn hold(engine: Engine, database: &str) -> Blocker {
        match engine {
            Engine::Sqlite => {
                let other = rusqlite::Connection::open(database).unwrap();
                other.execute_batch("BEGIN IMMEDIATE").unwrap();
                Blocker::Sqlite(other)
            }
            Engine::Postgres => Blocker::lock_postgres(database, "modules, subjects, chapters IN EXCLUSIVE MODE"),
        }
    }

    /// Takes `LOCK TABLE {what}` on the PostgreSQL database `url`, on another connection.
    pub fn lock_postgres(url: &str, what: &str) -> Blocker {
        Blocker::hold_on_postgres(url, format!("BEGIN; LOCK TABLE {what}"))
    }

    /// Runs `take` on a connection of its own to the PostgreSQL database `url`, and keeps that
    /// connection, with whatever `take` holds, until released (its transaction, if any, then
    /// commits, and the connection closes).
    pub fn hold_on_postgres(url: &str, take: String) -> Blocker {
        let url = url.to_owned();
        let (locked, wait) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let in_transaction = take.trim_start().to_ascii_uppercase().starts_with("BEGIN");
        let holder = std::thread::spawn(move || {
            let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            c.batch_execute(&take).unwrap();
            locked.send(()).unwrap();
            let _ = released.recv();
            if in_transaction && !c.is_closed() {
                c.batch_execute("COMMIT").unwrap();
            }
        });
        wait.recv().unwrap();
        Blocker::Postgres(release, holder)
    }

    pub fn release(self) {
        match self {
            Blocker::Sqlite(c) => c.execute_batch("COMMIT").unwrap(),
            Blocker::Postgres(release, holder) => {
                release.send(()).unwrap();
                holder.join().unwrap();
            }
        }
    }
}

/// A session-level advisory lock held on a connection of its own until dropped (then the
/// connection closes, which releases it): keeps out whatever takes that lock, e.g. coursed's
/// folding of search changes.
pub struct AdvisoryLock(Option<Blocker>);

impl AdvisoryLock {
    /// Takes the lock `key` on the database at `url`; returns once it is held.
    pub fn hold(url: &str, key: i64) -> AdvisoryLock {
        AdvisoryLock(Some(Blocker::hold_on_postgres(url, format!("SELECT pg_advisory_lock({key})"))))
    }
}

impl Drop for AdvisoryLock {
    /// Quietly: a panic here while a failed assertion unwinds would abort the whole binary.
    fn drop(&mut self) {
        if let Some(Blocker::Postgres(release, holder)) = self.0.take() {
            let _ = release.send(());
            let _ = holder.join();
        }
    }
}

//! What only PostgreSQL can show: a server that is down at start or restarts while coursed
//! serves, TLS, and replicas that are separate processes (SIGKILL, the shared first token).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{Blocker, Engine, TestApp};
use crate::pg_cluster::{self, Private};
use crate::process::{create_concurrently, Server, Starting};

#[tokio::test]
async fn a_restart_of_postgres_while_serving_gives_503_then_recovers_by_itself() {
    let Some(pg) = Private::start(false) else { return };
    let t = TestApp::open(Engine::Postgres, &pg.fresh_database()).await.unwrap();
    let m = t.module("Before").await;
    let stop = tokio::task::spawn_blocking({
        let pg = std::sync::Arc::new(pg);
        let p = pg.clone();
        move || {
            p.stop();
            pg
        }
    });
    let pg = stop.await.unwrap();
    for request in [t.req("GET", &format!("/v1/modules/{m}")), t.req("GET", "/v1/modules")] {
        let started = Instant::now();
        let r = t.send(request).await;
        r.assert_problem(503);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(started.elapsed() < Duration::from_secs(10), "bounded: {:?}", started.elapsed());
    }
    let body = json!({"data": {"type": "modules", "attributes": {"title": "During"}}});
    t.write("POST", "/v1/modules", body).await.assert_problem(503);
    t.send(warp::test::request().path("/readyz")).await.assert_status(503);

    let p = pg.clone();
    tokio::task::spawn_blocking(move || p.restart()).await.unwrap();
    // Connections that died with the old server are replaced without a client seeing it, for
    // writes as for reads.
    let body = json!({"data": {"type": "modules", "attributes": {"title": "After"}}});
    t.write("POST", "/v1/modules", body).await.assert_status(201);
    t.send(warp::test::request().path("/readyz")).await.assert_status(200);
    let r = t.get(&format!("/v1/modules/{m}")).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["attributes"]["title"], "Before");
    assert_eq!(t.get("/v1/modules").await.body["meta"]["page"]["total"], 2, "nothing of the gap was written");
}

#[tokio::test]
async fn sslmode_require_encrypts_the_connection_and_disable_does_not() {
    let Some(pg) = Private::start(true) else { return };
    let database = pg.fresh_database();
    let sep = if database.contains('?') { '&' } else { '?' };
    let encrypted = |t: &TestApp| {
        let sql = "SELECT CAST(ssl AS integer) FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
        let t = t.app.db.clone();
        async move { t.read(move |tx| Ok(tx.first(sql, &[])?)).await.unwrap().and_then(|v| v.cell().as_i64()) }
    };
    let t = TestApp::open(Engine::Postgres, &format!("{database}{sep}sslmode=require")).await.unwrap();
    assert_eq!(encrypted(&t).await, Some(1));
    t.module("Over TLS").await;
    let t = TestApp::open(Engine::Postgres, &format!("{database}{sep}sslmode=disable")).await.unwrap();
    assert_eq!(encrypted(&t).await, Some(0));
    assert_eq!(t.get("/v1/modules").await.body["meta"]["page"]["total"], 1);
}

#[tokio::test]
async fn sslmode_require_against_a_server_without_tls_is_refused_clearly() {
    let Some(server) = pg_cluster::server() else { return };
    let database = server.fresh_database().replace("sslmode=disable", "sslmode=require");
    let e = TestApp::open(Engine::Postgres, &database).await.err().expect("refused");
    assert!(e.contains("PostgreSQL") && e.to_lowercase().contains("tls"), "{e}");
}

#[tokio::test]
async fn a_database_that_does_not_exist_is_refused_at_once_not_waited_for() {
    let Some(server) = pg_cluster::server() else { return };
    let url = server.fresh_database();
    let (head, tail) = url.split_once('?').unwrap();
    let missing = format!("{}/no_such_database?{tail}", &head[..head.rfind('/').unwrap()]);
    let started = Instant::now();
    let e = TestApp::open(Engine::Postgres, &missing).await.err().expect("refused");
    assert!(e.contains("does not exist"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "not waited for: {:?}", started.elapsed());
}

#[test]
fn a_server_down_at_start_is_waited_for_with_back_off() {
    let Some(pg) = Private::start(false) else { return };
    let database = pg.fresh_database();
    pg.stop();
    let starting = Starting::spawn(&["--database", &database, "--token", "t", "--database-wait", "60s"]);
    let line = starting.wait_for_stderr("is not answering");
    assert!(line.contains("retrying in"), "{line}");
    pg.restart();
    let server = starting.ready().expect("ready once PostgreSQL is up");
    assert_eq!(server.call("GET", "/v1/modules", "t", None).0, 200);
}

#[test]
fn coursed_gives_up_after_database_wait_with_a_clear_message() {
    let Some(pg) = Private::start(false) else { return };
    let database = pg.fresh_database();
    pg.stop();
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["serve", "--port", "0", "--token", "t", "--database-wait", "1s", "--database", &database])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(started.elapsed() < Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not answer within 1 s"), "{err}");
    assert!(!err.contains("secret"), "{err}");
}

#[test]
fn replicas_share_the_token_generated_at_the_first_start() {
    let Some(server) = pg_cluster::server() else { return };
    let database = server.fresh_database();
    let first = Server::start(&["--database", &database]);
    let token = first.preamble.get(1).expect("the generated token is printed").trim().to_owned();
    assert!(first.preamble[0].contains("in the database"), "{:?}", first.preamble);
    let second = Server::start(&["--database", &database]);
    let said = second.preamble.join("\n");
    assert!(!said.contains(&token), "printed only once: {said}");
    assert!(said.contains("kept in the database"), "{said}");
    // The first request it prints reads the token with psql (where psql is at hand).
    if std::process::Command::new("psql").arg("--version").output().is_ok_and(|o| o.status.success()) {
        assert_eq!(crate::first_start::first_request(&second, std::path::Path::new("/")), 200, "{said}");
    }
    assert_eq!(second.call("GET", "/v1/modules", &token, None).0, 200);
    assert_eq!(first.call("GET", "/v1/modules", "guess", None).0, 401);
}

#[test]
fn a_database_with_tokens_of_its_own_gets_no_generated_token() {
    let Some(server) = pg_cluster::server() else { return };
    crate::binary::no_token_is_generated_beside_tokens_of_its_own(|| server.fresh_database());
}

#[test]
fn a_replica_killed_with_sigkill_loses_nothing_it_acknowledged() {
    let Some(server) = pg_cluster::server() else { return };
    let database = server.fresh_database();
    let (a, b) = (
        Server::start(&["--database", &database, "--token", "t"]),
        Server::start(&["--database", &database, "--token", "t"]),
    );
    let ids = create_concurrently(&[&a, &b], "t", 8, 20);
    let mut a = a;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let (_, body) = b.call("GET", "/v1/subjects", "t", None);
    assert_eq!(body["meta"]["page"]["total"], 160);
    for id in ids.iter().step_by(9) {
        assert_eq!(b.call("GET", &format!("/v1/subjects/{id}"), "t", None).0, 200, "{id}");
    }
}

/// A bulk load takes its tables in one order, and a request running meanwhile may hold one of
/// them and wait for another: PostgreSQL then aborts the load's lock (it has waited longest),
/// and the load takes its locks again instead of failing.
#[test]
fn a_bulk_load_that_deadlocks_with_a_request_takes_its_locks_again() {
    let Some(pg) = crate::pg_cluster::server() else { return };
    let database = pg.fresh_database();
    let connect = |url: &str| postgres::Client::connect(url, postgres::NoTls).expect("connect");
    // Migrated by a first open, as a running server would have.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.jsonl");
    let lines = [
        json!({"format": "coursed-bundle", "version": 1}),
        json!({"type": "modules", "id": "01900000-0000-7000-8000-000000000001", "attributes": {"title": "Loaded"}}),
    ];
    std::fs::write(&file, lines.iter().map(|l| l.to_string() + "\n").collect::<String>()).unwrap();
    drop(coursed::store::Db::open(&crate::helpers::test_options(&database)).expect("migrated"));

    // A request's snapshot that has read the word counts (as a one-word search does first).
    let (url, (read_counts, counts_read), (go_on, told)) =
        (database.clone(), std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let request = std::thread::spawn(move || {
        let mut c = connect(&url);
        let mut tx = c.transaction().unwrap();
        tx.query("SELECT count(*) FROM search_words", &[]).unwrap();
        read_counts.send(()).unwrap();
        told.recv().unwrap();
        // Now the resources, which the load holds: a deadlock, which PostgreSQL resolves by
        // aborting the load's wait; this read then goes on.
        tx.query("SELECT count(*) FROM modules", &[]).unwrap();
        tx.commit().unwrap();
    });
    counts_read.recv().unwrap();
    let (db, path) = (database.clone(), file.to_str().unwrap().to_owned());
    let load = std::thread::spawn(move || {
        coursed::bundle::import(
            &db,
            &path,
            coursed::bundle::Options { merge: false, dry_run: false, no_history: false, follow: false },
        )
    });
    // Wait until the load waits for the word counts the request holds.
    let mut watcher = connect(&database);
    let deadline = Instant::now() + Duration::from_secs(30);
    let waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'search_words'::regclass";
    while watcher.query_one(waiting, &[]).unwrap().get::<_, i64>(0) == 0 {
        assert!(Instant::now() < deadline, "the load never waited for the word counts");
        std::thread::sleep(Duration::from_millis(10));
    }
    go_on.send(()).unwrap();
    request.join().unwrap();
    load.join().unwrap().expect("the load takes its locks again and succeeds");
    let loaded: i64 = watcher.query_one("SELECT count(*) FROM modules", &[]).unwrap().get(0);
    assert_eq!(loaded, 1);
}

#[tokio::test]
async fn requests_beyond_every_connection_are_shed_with_503_once_they_waited_too_long() {
    let Some(server) = pg_cluster::server() else { return };
    let first = TestApp::open(Engine::Postgres, &server.fresh_database()).await.unwrap();
    let m = first.module("Held").await;
    // Long lock waits, so that the connections stay taken while the lock is held.
    let t = first.replica(Duration::from_secs(20)).await;
    // Reads of modules wait behind this lock, on every connection the engine has.
    let held = Blocker::lock_postgres(&t.database, "modules IN ACCESS EXCLUSIVE MODE");
    // Far more reads than the engine has connections (16) and threads (20).
    const READS: usize = 60;
    let started = Instant::now();
    let reads = (0..READS).map(|_| t.send(t.req("GET", &format!("/v1/modules/{m}"))));
    // Past the 3 s that work may wait for a thread, the lock goes.
    let release_later = async {
        tokio::time::sleep(Duration::from_millis(3500)).await;
        tokio::task::spawn_blocking(move || held.release()).await.unwrap();
    };
    let (answers, ()) = tokio::join!(futures_util::future::join_all(reads), release_later);
    assert!(started.elapsed() < Duration::from_secs(15), "bounded: {:?}", started.elapsed());
    let served = answers.iter().filter(|r| r.status == 200).count();
    for r in answers.iter().filter(|r| r.status != 200) {
        r.assert_problem(503);
        assert_eq!(r.header("retry-after"), Some("1"));
    }
    // The reads that held a connection finish once the lock goes; those that waited in the
    // queue past their time are answered 503 unrun instead of being served late.
    assert!((10..=20).contains(&served), "{served} of {READS} served; the rest should have been shed");
    t.get(&format!("/v1/modules/{m}")).await.assert_status(200);
}

#[test]
fn a_server_logs_once_that_its_database_stopped_answering_and_once_that_it_is_back() {
    let Some(pg) = Private::start(false) else { return };
    let database = pg.fresh_database();
    let server = Server::start(&["--database", &database, "--token", "t"]);
    let readyz = || crate::process::try_call(&server.addr, "GET", "/readyz", "", None).map(|(status, _)| status);
    let until = |status: u16| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while readyz() != Some(status) {
            assert!(Instant::now() < deadline, "/readyz never answered {status}");
            std::thread::sleep(Duration::from_millis(100));
        }
        // A load balancer goes on asking: nothing more is logged.
        for _ in 0..3 {
            assert_eq!(readyz(), Some(status));
        }
    };
    until(200);
    pg.stop();
    until(503);
    pg.restart();
    until(200);
    let said = crate::first_start::logged(&server, "the database ", Duration::from_secs(2));
    let lost: Vec<&String> = said.iter().filter(|l| l.contains("the database does not answer")).collect();
    let back: Vec<&String> = said.iter().filter(|l| l.contains("the database answers again")).collect();
    assert_eq!((lost.len(), back.len()), (1, 1), "{said:#?}");
    assert!(lost[0].contains("[WARN]") && back[0].contains("[WARN]"), "{said:#?}");
}

//! coursed on the power-cut file system, cut at many points: after each cut the server starts
//! again on what the disk kept, every acknowledged write is there as acknowledged (or as a
//! later write left it that may have committed unacknowledged), nothing unacknowledged is half
//! there, the counts behind `meta.page.total` match the rows, and SQLite's own checks pass.
//!
//! Each test is seeded (COURSED_POWERCUT_SEED, else a fixed seed) and runs a number of cuts
//! (COURSED_POWERCUT_CUTS, else a few for the suite); `bench/powercut.sh` runs thousands.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use std::path::Path;

use super::{Op, PowerCut};
use crate::process::{try_call_as, Server, Starting};

pub const TOKEN: &str = "powercut-test-token-0123456789";

/// The generator of `coursed generate` (splitmix64): the same seed cuts at the same points.
pub use coursed::dataset::Rng;

/// A draw in `low..=high`.
pub trait Draw {
    fn range(&mut self, low: u64, high: u64) -> u64;
}

impl Draw for Rng {
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }
}

/// The seed and the number of cuts of a test: from the environment, else these.
pub fn plan(default_cuts: usize) -> (u64, usize) {
    let seed = std::env::var("COURSED_POWERCUT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261128);
    let cuts = std::env::var("COURSED_POWERCUT_CUTS").ok().and_then(|s| s.parse().ok()).unwrap_or(default_cuts);
    (seed, cuts)
}

/// What a client sent, and whether it was acknowledged.
#[derive(Clone, Debug)]
enum Sent {
    Create { title: String },
    Update { id: String, title: String },
    Delete { id: String },
}

#[derive(Clone, Debug)]
pub struct Outcome {
    sent: Sent,
    /// The id a create was acknowledged with; `None` when not acknowledged.
    acked: Option<String>,
}

/// A subject as the model knows it: its title, or gone.
type Model = BTreeMap<String, Option<String>>;

/// A subject's content: its title again and again, to about `len` bytes.
pub fn content(title: &str, len: usize) -> String {
    format!("{title} ").repeat(len / (title.len() + 1) + 1)
}

fn subject_body(title: &str, len: usize) -> Value {
    json!({"data": {"type": "subjects", "attributes": {"title": title, "content": content(title, len)}}})
}

/// Where a round's cuts fall, and how much each write weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Small subjects; cuts at any change (on SQLite a third on a checkpoint's steps).
    Mixed,
    /// Subjects of 150 KB, so that checkpoints come every few dozen writes, and every cut on one
    /// of a checkpoint's steps: a write of a page into the database file, or its sync (SQLite).
    Checkpoints,
    /// Small subjects, a backup scheduled every second, and every cut on a backup's way to the
    /// disk: a write of its temporary file, or its sync.
    Backups,
}

impl Style {
    fn content(self) -> usize {
        match self {
            Style::Mixed | Style::Backups => 500,
            Style::Checkpoints => 150_000,
        }
    }
}

/// One client's writes until the power goes or `max` writes: creates, updates and deletes of
/// its own subjects. It stops at its first write not acknowledged.
fn client(round: &Round, name: &str, mut rng: Rng, mine: Vec<String>, max: usize, content: usize) -> Vec<Outcome> {
    let mut mine = mine;
    let mut log = Vec::new();
    for i in 0..max {
        if round.stopped() {
            break;
        }
        let pick = rng.range(0, 9);
        let sent = match (pick, mine.is_empty()) {
            (0..=5, _) | (_, true) => Sent::Create { title: format!("{name} n{i}") },
            (6..=8, false) => {
                let id = mine[rng.range(0, mine.len() as u64 - 1) as usize].clone();
                Sent::Update { id, title: format!("{name} n{i} updated") }
            }
            _ => Sent::Delete { id: mine.swap_remove(rng.range(0, mine.len() as u64 - 1) as usize) },
        };
        let answer = match &sent {
            Sent::Create { title } => round.send("POST", "/v1/subjects", Some(&subject_body(title, content))),
            Sent::Update { id, title } => {
                let mut body = subject_body(title, content);
                body["data"]["id"] = json!(id);
                round.send("PATCH", &format!("/v1/subjects/{id}"), Some(&body))
            }
            Sent::Delete { id } => round.send("DELETE", &format!("/v1/subjects/{id}"), None),
        };
        let Some(body) = answer else {
            log.push(Outcome { sent, acked: None });
            break;
        };
        let acked = match &sent {
            Sent::Create { .. } => {
                let id = body["data"]["id"].as_str().expect("a created subject's id").to_owned();
                mine.push(id.clone());
                Some(id)
            }
            Sent::Update { id, .. } | Sent::Delete { id } => Some(id.clone()),
        };
        log.push(Outcome { sent, acked });
    }
    log
}

/// What the clients of a round share.
pub struct Round<'a> {
    addr: &'a str,
    /// Set when the power went: no client starts another write.
    stop: &'a AtomicBool,
    disk: &'a PowerCut,
    /// What the clients saw that they should not have.
    surprises: &'a Mutex<Vec<String>>,
}

impl Round<'_> {
    /// The power went: no client starts another write.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// A write: its body when acknowledged (2xx); `None` when not. Once the power is off
    /// anything may fail in any way (the machine is dead to its clients); before, a write is
    /// refused only with a 503, and anything else is noted as a surprise.
    pub fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Option<Value> {
        self.send_as(crate::helpers::JSONAPI, method, path, body)
    }

    /// [`Round::send`] with another media type.
    pub fn send_as(&self, media_type: &str, method: &str, path: &str, body: Option<&Value>) -> Option<Value> {
        match try_call_as(self.addr, method, path, TOKEN, media_type, body) {
            Some((status, body)) if (200..300).contains(&status) => Some(body),
            Some((status, body)) => {
                if status != 503 && self.disk.is_on() {
                    self.surprises
                        .lock()
                        .unwrap()
                        .push(format!("{method} {path} got {status} with the power on: {body}"));
                }
                None
            }
            None => None,
        }
    }
}

/// What the clients of a round write, and what is checked after each cut.
pub trait Workload: Sync {
    /// What one client did in a round.
    type Log: Send;
    /// coursed started (before the clients write, and again after the cut).
    fn started(&self, _server: &Server) {}
    /// Client `c`'s writes in a round, until the power goes (`round.stopped()`) or it is done.
    fn client(&self, round: &Round, c: usize, name: &str, rng: Rng) -> Self::Log;
    /// After the restart on what the disk kept: checks it against what was acknowledged, and
    /// takes what survived as the model of the next round.
    fn verify(&mut self, server: &Server, logs: Vec<Self::Log>, round: usize);
    /// How many writes were acknowledged in these logs.
    fn acked(logs: &[Self::Log]) -> usize;
}

pub const CLIENTS: usize = 4;

/// Creates, updates and deletes of subjects, one at a time, from each client.
#[derive(Default)]
pub struct SingleWrites {
    model: Model,
    content: usize,
}

impl SingleWrites {
    pub fn new(style: Style) -> SingleWrites {
        SingleWrites { model: Model::new(), content: style.content() }
    }
}

impl Workload for SingleWrites {
    type Log = Vec<Outcome>;

    fn client(&self, round: &Round, c: usize, name: &str, rng: Rng) -> Vec<Outcome> {
        let present = self.model.iter().filter(|(_, s)| s.is_some()).map(|(id, _)| id.clone());
        let mine: Vec<String> = present.skip(c).step_by(CLIENTS).collect();
        client(round, name, rng, mine, 40, self.content)
    }

    fn verify(&mut self, server: &Server, logs: Vec<Vec<Outcome>>, round: usize) {
        self.model = verify(server, &self.model, &logs, round, self.content);
    }

    fn acked(logs: &[Vec<Outcome>]) -> usize {
        logs.iter().flatten().filter(|o| o.acked.is_some()).count()
    }
}

/// What each subject may be after the cut: the model's state moved on by every acknowledged
/// write, and, for each client's last write when it was not acknowledged, that write too.
struct Expected {
    /// id → the states it may be in (a title, or gone).
    by_id: BTreeMap<String, BTreeSet<Option<String>>>,
    /// Titles of creates not acknowledged: each may exist once, with an id not known.
    maybe_created: BTreeSet<String>,
}

fn expected(model: &Model, logs: &[Vec<Outcome>]) -> Expected {
    let mut by_id: BTreeMap<String, BTreeSet<Option<String>>> =
        model.iter().map(|(id, state)| (id.clone(), BTreeSet::from([state.clone()]))).collect();
    let mut maybe_created = BTreeSet::new();
    for log in logs {
        for outcome in log {
            match (&outcome.sent, &outcome.acked) {
                (Sent::Create { title }, Some(id)) => {
                    by_id.insert(id.clone(), BTreeSet::from([Some(title.clone())]));
                }
                (Sent::Update { id, title }, Some(_)) => {
                    by_id.insert(id.clone(), BTreeSet::from([Some(title.clone())]));
                }
                (Sent::Delete { id }, Some(_)) => {
                    by_id.insert(id.clone(), BTreeSet::from([None]));
                }
                (Sent::Create { title }, None) => {
                    maybe_created.insert(title.clone());
                }
                (Sent::Update { id, title }, None) => {
                    by_id.get_mut(id).expect("a known subject").insert(Some(title.clone()));
                }
                (Sent::Delete { id }, None) => {
                    by_id.get_mut(id).expect("a known subject").insert(None);
                }
            }
        }
    }
    Expected { by_id, maybe_created }
}

/// Every resource of `kind` the server lists (`fields` asked), checking that `meta.page.total`
/// counts the rows listed.
pub fn all(server: &Server, kind: &str, fields: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut total = None;
    for page in 1.. {
        let path = format!("/v1/{kind}?page[size]=100&page[number]={page}&fields[{kind}]={fields}&sort=id");
        let (status, body) = server.call("GET", &path, TOKEN, None);
        assert_eq!(status, 200, "{body}");
        total = body["meta"]["page"]["total"].as_u64().or(total);
        let data = body["data"].as_array().expect("data").clone();
        let last = data.len() < 100;
        all.extend(data);
        if last {
            break;
        }
    }
    assert_eq!(total, Some(all.len() as u64), "meta.page.total counts the {kind} listed");
    all
}

/// Every subject the server lists: id → title.
pub fn titles(server: &Server) -> BTreeMap<String, String> {
    all(server, "subjects", "title")
        .iter()
        .map(|s| (s["id"].as_str().unwrap().to_owned(), s["attributes"]["title"].as_str().unwrap().to_owned()))
        .collect()
}

/// Every subject the server lists, id → title, each one's content checked.
fn listed(server: &Server, content_len: usize) -> BTreeMap<String, String> {
    let mut listed = BTreeMap::new();
    for s in all(server, "subjects", "title,content") {
        let title = s["attributes"]["title"].as_str().expect("title").to_owned();
        assert_eq!(s["attributes"]["content"], json!(content(&title, content_len)), "a subject written whole");
        listed.insert(s["id"].as_str().unwrap().to_owned(), title);
    }
    listed
}

/// The change feed read from its start: gapless (consecutive places), and replayed it gives
/// the subjects the API lists (no revision lost or left over for any row).
pub fn feed_replays_to(server: &Server, listed: &BTreeMap<String, String>, round: usize) -> u64 {
    let mut replayed: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut path = "/v1/revisions?page[size]=1000".to_owned();
    let mut last = 0u64;
    loop {
        let (status, body) = server.call("GET", &path, TOKEN, None);
        assert_eq!(status, 200, "{body}");
        let data = body["data"].as_array().expect("data").clone();
        for r in &data {
            let place: u64 = r["meta"]["cursor"].as_str().and_then(|c| c.parse().ok()).expect("a cursor");
            assert_eq!(place, last + 1, "cut {round}: the feed has a gap before {place}");
            last = place;
            let resource = &r["relationships"]["resource"]["data"];
            if resource["type"] != "subjects" {
                continue;
            }
            let id = resource["id"].as_str().unwrap().to_owned();
            let state = replayed.entry(id).or_default();
            match r["attributes"]["action"].as_str() {
                Some("delete") => *state = None,
                _ => {
                    if let Some(title) = r["attributes"]["changes"]["title"]["after"].as_str() {
                        *state = Some(title.to_owned());
                    }
                }
            }
        }
        if data.is_empty() {
            break;
        }
        let next = body["links"]["next"].as_str().expect("links.next");
        path = next[next.find("/v1/").expect("a link into the API")..].to_owned();
    }
    let replayed: BTreeMap<String, String> = replayed.into_iter().filter_map(|(id, t)| Some((id, t?))).collect();
    assert_eq!(&replayed, listed, "cut {round}: the feed replayed is the catalogue");
    last
}

/// Checks what survived against what may have; returns the model as it now is.
fn verify(server: &Server, model: &Model, logs: &[Vec<Outcome>], round: usize, content_len: usize) -> Model {
    let expected = expected(model, logs);
    let listed = listed(server, content_len);
    feed_replays_to(server, &listed, round);
    let mut now = Model::new();
    for (id, allowed) in &expected.by_id {
        let state = listed.get(id).cloned();
        assert!(
            allowed.contains(&state),
            "cut {round}: subject {id} is {state:?}, but may only be one of {allowed:?} (an acknowledged write lost?)"
        );
        now.insert(id.clone(), state);
    }
    let mut seen = BTreeSet::new();
    for (id, title) in &listed {
        if expected.by_id.contains_key(id) {
            continue;
        }
        assert!(
            expected.maybe_created.contains(title) && seen.insert(title.clone()),
            "cut {round}: subject {id} {title:?} was never acknowledged nor could have been written"
        );
        now.insert(id.clone(), Some(title.clone()));
    }
    now
}

/// SQLite's own checks of the file: the b-trees, and each full-text index against its table.
pub fn sqlite_checks(database: &str) {
    let db = rusqlite::Connection::open(database).expect("open the database");
    let ok: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("integrity_check");
    assert_eq!(ok, "ok", "PRAGMA integrity_check");
    for t in ["modules", "subjects", "chapters"] {
        for index in [format!("{t}_search"), format!("{t}_titles")] {
            db.execute_batch(&format!("INSERT INTO {index} ({index}, rank) VALUES ('integrity-check', 1)"))
                .unwrap_or_else(|e| panic!("FTS5 integrity-check of {index}: {e}"));
        }
    }
}

/// Every scheduled backup in `dir` (a `coursed-*.db`) opens and passes SQLite's checks;
/// the one being written when the power went is whole under its name or not there at all.
fn backups_whole(dir: &Path, round: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("coursed-") && name.ends_with(".db")) {
            continue;
        }
        let db = rusqlite::Connection::open_with_flags(entry.path(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap_or_else(|e| panic!("cut {round}: backup {name} does not open: {e}"));
        let ok: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("cut {round}: backup {name}: {e}"));
        assert_eq!(ok, "ok", "cut {round}: backup {name} is damaged");
        db.query_row("SELECT count(*) FROM subjects", [], |r| r.get::<_, i64>(0))
            .unwrap_or_else(|e| panic!("cut {round}: backup {name} cannot be read: {e}"));
    }
}

/// Where a round's cut is aimed.
#[derive(Clone, Copy)]
enum Aim {
    /// The n-th change of any kind.
    Any,
    /// The n-th write of a page into the SQLite database file (only checkpoints write it).
    DatabaseWrite,
    /// The n-th sync of the SQLite database file (a checkpoint that reached the WAL's end).
    DatabaseSync,
    /// The n-th sync of the SQLite WAL: a group committed, and cut before it is on the disk.
    WalSync,
    /// The n-th write of a scheduled backup's temporary file.
    BackupWrite,
    /// The sync of a scheduled backup's temporary file, before its rename.
    BackupSync,
}

/// The machine whose power is cut: the disk, coursed's arguments, and what else runs on it.
pub struct Machine<'a> {
    pub disk: &'a PowerCut,
    pub args: Vec<String>,
    /// The SQLite file, checked by SQLite itself after each cut.
    pub sqlite: Option<String>,
    /// The PostgreSQL cluster whose data directory is on the disk.
    pub postgres: Option<&'a crate::pg_cluster::Private>,
    /// The folder of scheduled backups, each checked whole after each cut.
    pub backups: Option<std::path::PathBuf>,
    /// About how many changes a round of the clients' writes makes on the disk (a first
    /// guess; then as measured): the cuts fall within it, and past it now and then (a cut
    /// while idle).
    pub span: u64,
}

impl Machine<'_> {
    pub fn args(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }

    /// Starts coursed; after a cut it must start, whatever the disk kept.
    pub fn start(&self) -> Server {
        Starting::spawn(&self.args()).ready().unwrap_or_else(|e| panic!("coursed did not start after a power cut: {e}"))
    }

    /// The power goes (if the armed change has not taken it already): every process on the
    /// machine stops at once, and the disk keeps what was synced. Then the power comes back.
    pub fn cut(&self, server: Option<Server>) {
        // The power first: a process waiting on the disk (a held sync) cannot die before the
        // disk answers it.
        self.disk.power_off();
        if let Some(mut server) = server {
            let _ = server.child.kill();
            let _ = server.child.wait();
            if std::env::var_os("COURSED_POWERCUT_LOG").is_some() {
                server.stderr.lock().unwrap().try_iter().for_each(|line| eprintln!("coursed: {line}"));
            }
        }
        if let Some(pg) = self.postgres {
            pg.crash();
        }
        self.disk.cut();
        if let Some(pg) = self.postgres {
            pg.restart();
        }
    }
}

/// Stops it as an operator would (SIGTERM), so that the file can be checked by SQLite alone.
pub fn stop(server: Server) {
    server.signal("-TERM");
    let log = std::mem::replace(&mut *server.stderr.lock().unwrap(), std::sync::mpsc::channel().1);
    let status = server.wait(Duration::from_secs(30));
    if !status.success() {
        // The lines it wrote come in on their own thread: the last of them after it ended.
        std::thread::sleep(Duration::from_millis(200));
        let lines: Vec<String> = log.try_iter().collect();
        panic!("coursed did not stop cleanly ({status}): {lines:#?}");
    }
}

/// Single writes from four clients at once, the power cut at a random change each round (the
/// first round's cut may come while coursed makes its new database).
pub fn single_writes(machine: &Machine, style: Style, seed: u64, cuts: usize) {
    rounds(machine, style, seed, cuts, &mut SingleWrites::new(style));
}

/// `cuts` rounds of `workload`'s clients on `machine`, each ended by a power cut and checked
/// after the restart.
pub fn rounds<W: Workload>(machine: &Machine, style: Style, seed: u64, cuts: usize, workload: &mut W) {
    let disk = machine.disk;
    let mut rng = Rng(seed);
    // The changes a whole round of writes makes: first a guess, then as measured.
    let mut span = machine.span;
    for round in 0..cuts {
        // Mostly within the clients' writes; now and then past them all (a cut while idle).
        let at = rng.range(1, span * 11 / 10);
        if round == 0 && at.is_multiple_of(3) {
            // During the first start: creating the database and its migrations.
            let at = rng.range(1, 200);
            eprintln!("cut {round}: at change {at} of the first start");
            disk.arm(at);
            match Starting::spawn(&machine.args()).ready() {
                Ok(server) => machine.cut(Some(server)),
                Err(_) => {
                    assert!(!disk.is_on(), "coursed failed to start with the power on");
                    machine.cut(None);
                }
            }
            continue;
        }
        let server = machine.start();
        workload.started(&server);
        let pid = server.child.id() as libc::pid_t;
        // On SQLite, a third of the cuts fall on a checkpoint's steps: its copying of pages
        // into the database file (written only then), and its sync.
        let file = machine.sqlite.as_deref().and_then(|f| Some(Path::new(f).file_name()?.to_str()?.to_owned()));
        let aim = match (style, rng.range(0, 5)) {
            (Style::Checkpoints, n) => [Aim::DatabaseWrite, Aim::DatabaseSync][n as usize % 2],
            (Style::Backups, n) => [Aim::BackupWrite, Aim::BackupSync][n as usize % 2],
            (Style::Mixed, 0) => Aim::DatabaseWrite,
            (Style::Mixed, 1) => Aim::DatabaseSync,
            (Style::Mixed, 2) => Aim::WalSync,
            (Style::Mixed, _) => Aim::Any,
        };
        let mut at = match (aim, file) {
            (Aim::DatabaseWrite, Some(file)) => {
                let n = rng.range(1, 1000);
                disk.arm_on(Op::Write, &file, n);
                format!("write {n} of {file}")
            }
            (Aim::DatabaseSync, Some(file)) => {
                let n = rng.range(1, 3);
                disk.arm_on(Op::Sync, &file, n);
                format!("sync {n} of {file}")
            }
            (Aim::WalSync, Some(file)) => {
                let n = rng.range(1, 150);
                disk.arm_on(Op::Sync, &format!("{file}-wal"), n);
                format!("sync {n} of {file}-wal")
            }
            (Aim::BackupWrite, _) => {
                let n = rng.range(1, 400);
                disk.arm_on(Op::Write, "*.partial-", n);
                format!("write {n} of a backup being written")
            }
            (Aim::BackupSync, _) => {
                disk.arm_on(Op::Sync, "*.partial-", 1);
                "the sync of a backup being written".to_owned()
            }
            _ => {
                disk.arm(at);
                format!("change {at}")
            }
        };
        let armed_at = disk.counts().changes;
        let stop_writes = AtomicBool::new(false);
        let logs = Mutex::new(Vec::new());
        let surprises = Mutex::new(Vec::new());
        let shared = Round { addr: &server.addr, stop: &stop_writes, disk, surprises: &surprises };
        std::thread::scope(|scope| {
            let mut clients = Vec::new();
            for c in 0..CLIENTS {
                let (logs, shared, workload) = (&logs, &shared, &*workload);
                let rng = Rng(rng.next());
                clients.push(scope.spawn(move || {
                    let log = workload.client(shared, c, &format!("r{round} c{c}"), rng);
                    logs.lock().unwrap().push(log);
                }));
            }
            // The power goes at the armed change, or after the clients are done.
            while !disk.wait_off(Duration::from_millis(20)) && clients.iter().any(|c| !c.is_finished()) {}
            if disk.is_on() {
                span = (disk.counts().changes - armed_at).max(10);
                if style == Style::Backups {
                    // The next backup (one a second) comes while idle.
                    disk.wait_off(Duration::from_millis(2500));
                }
            }
            stop_writes.store(true, Ordering::SeqCst);
            // The machine stops with the power: no answer leaves it after.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let met = !disk.is_on();
        machine.cut(Some(server));
        let surprises = surprises.into_inner().unwrap();
        assert!(surprises.is_empty(), "cut {round}: {surprises:?}");
        if !met {
            // Not at the armed moment: after everything.
            at = format!("{at} (not met: cut while idle)");
        }
        let logs = logs.into_inner().unwrap();
        let counts = disk.counts();
        eprintln!("cut {round}: at {at}, after {} acknowledged writes; {counts:?}", W::acked(&logs));
        let server = machine.start();
        workload.started(&server);
        workload.verify(&server, logs, round);
        stop(server);
        if let Some(database) = &machine.sqlite {
            sqlite_checks(database);
        }
        if let Some(dir) = &machine.backups {
            backups_whole(dir, round);
        }
    }
    assert!(disk.counts().cuts as usize >= cuts, "every round cut the power");
}

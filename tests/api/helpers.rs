//! Test harness: a fresh database and app per test (on the engine of the running test, see
//! [`crate::engines`]), requests through the real filter tree, and every response body checked
//! against the official JSON:API 1.0 schema.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{json, Value};
use warp::http::{HeaderMap, StatusCode};

use coursed::app::App;
use coursed::store::{Db, Durability, Options};
use coursed::tokens::Tokens;

pub(crate) use crate::engines::on_both;
pub use crate::engines::{Blocker, Engine};

pub const TOKEN: &str = "test-token";
pub const JSONAPI: &str = "application/vnd.api+json";
/// The media type of an atomic operations request.
pub const ATOMIC: &str = "application/vnd.api+json; ext=\"https://jsonapi.org/ext/atomic\"";

/// One app over its own temporary database.
pub struct TestApp {
    pub app: Arc<App>,
    pub engine: Engine,
    /// The SQLite file or the PostgreSQL URL.
    pub database: String,
    /// Removed (with a SQLite database) when the test ends.
    _dir: Arc<tempfile::TempDir>,
}

/// A response, its body parsed (and schema-checked when it has one).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// `data.id` of a single-resource document.
    pub fn id(&self) -> String {
        self.body["data"]["id"].as_str().unwrap_or_else(|| panic!("no data.id in {}", self.body)).to_owned()
    }
    pub fn data(&self) -> &Vec<Value> {
        self.body["data"].as_array().unwrap_or_else(|| panic!("data is not an array: {}", self.body))
    }
    /// The ids of an array `data`.
    pub fn ids(&self) -> Vec<String> {
        self.data().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
    }
    /// The first error object.
    pub fn error(&self) -> &Value {
        &self.body["errors"][0]
    }
    #[track_caller]
    pub fn assert_status(&self, status: u16) -> &Self {
        assert_eq!(self.status.as_u16(), status, "unexpected status; body: {}", self.body);
        self
    }
    /// Asserts an error document with `status` whose first error has a useful detail.
    #[track_caller]
    pub fn assert_problem(&self, status: u16) -> &Self {
        self.assert_status(status);
        let e = self.error();
        assert_eq!(e["status"], status.to_string(), "{}", self.body);
        assert!(e["detail"].as_str().is_some_and(|d| d.len() > 10), "error without a useful detail: {}", self.body);
        assert_eq!(self.header("content-type"), Some(JSONAPI));
        self
    }
    /// Asserts an error document with `status` whose first error points at `at` (a pointer
    /// into the body, or a query parameter's name).
    #[track_caller]
    pub fn assert_error(&self, status: u16, at: &str) -> &Self {
        self.assert_problem(status);
        let e = self.error();
        let source = e["source"]["pointer"].as_str().or(e["source"]["parameter"].as_str());
        assert_eq!(source, Some(at), "error source: {}", self.body);
        self
    }
}

pub fn test_options(path: &str) -> Options {
    Options {
        busy_timeout: std::time::Duration::from_millis(200),
        count_statements: true,
        // A test's PostgreSQL database is its own to migrate (coursed would ask for a backup
        // first: see `upgrade.rs`); a SQLite file is backed up beside it, as by a server.
        before_migration: match coursed::store::is_postgres_url(path) {
            true => coursed::store::BeforeMigration::Migrate,
            false => coursed::store::BeforeMigration::default(),
        },
        ..Options::new(path, Durability::Normal)
    }
}

impl TestApp {
    pub async fn new() -> TestApp {
        TestApp::with(|_| ()).await
    }

    /// An app over a database filled by `coursed generate`.
    pub async fn generated(shape: coursed::dataset::Shape) -> TestApp {
        TestApp::with(move |database| {
            coursed::dataset::generate(database, shape, None).expect("generate");
        })
        .await
    }

    /// An app over a fresh database opened with `change` made to the test options.
    pub async fn with_options(change: impl FnOnce(&mut Options) + Send + 'static) -> TestApp {
        TestApp::open_with(|_| (), change).await
    }

    async fn with(prepare: impl FnOnce(&str) + Send + 'static) -> TestApp {
        TestApp::open_with(prepare, |_| ()).await
    }

    async fn open_with(
        prepare: impl FnOnce(&str) + Send + 'static,
        change: impl FnOnce(&mut Options) + Send + 'static,
    ) -> TestApp {
        let engine = Engine::current();
        let dir = tempfile::tempdir().expect("temp dir");
        let database = engine.fresh_database(dir.path());
        let opened = database.clone();
        // Opening blocks (and the PostgreSQL client must not block an async thread).
        let db = tokio::task::spawn_blocking(move || {
            prepare(&opened);
            let mut options = test_options(&opened);
            change(&mut options);
            Db::open(&options)
        })
        .await
        .unwrap()
        .expect("open db");
        let app = App::new(db, Tokens::new([TOKEN.to_owned()]));
        TestApp { app: Arc::new(app), engine, database, _dir: Arc::new(dir) }
    }

    /// An app on `database` (a SQLite file, or the URL of a database made by the test).
    pub async fn open(engine: Engine, database: &str) -> Result<TestApp, String> {
        let opened = database.to_owned();
        let db = tokio::task::spawn_blocking(move || Db::open(&test_options(&opened))).await.unwrap()?;
        let app = App::new(db, Tokens::new([TOKEN.to_owned()]));
        let dir = tempfile::tempdir().expect("temp dir");
        Ok(TestApp { app: Arc::new(app), engine, database: database.to_owned(), _dir: Arc::new(dir) })
    }

    /// Two apps on one fresh database, as two replicas behind a load balancer (writers wait
    /// up to 5 s for each other's locks).
    pub async fn pair() -> (TestApp, TestApp) {
        let first = TestApp::new().await;
        let busy = std::time::Duration::from_secs(5);
        (first.replica(busy).await, first.replica(busy).await)
    }

    /// This app with its settings changed by `change` (before any request).
    pub fn configured(mut self, change: impl FnOnce(&mut App)) -> TestApp {
        change(Arc::get_mut(&mut self.app).expect("configured before use"));
        self
    }

    /// The response to `req` as sent: status, headers and body bytes (not parsed).
    pub async fn exchange(&self, req: warp::test::RequestBuilder) -> (StatusCode, HeaderMap, Bytes) {
        let routes = coursed::http::routes(self.app.clone());
        let (parts, body) = req.reply(&routes).await.into_parts();
        (parts.status, parts.headers, body)
    }

    /// Another app on this app's database, whose writes wait up to `busy` for a lock.
    pub async fn replica(&self, busy: std::time::Duration) -> TestApp {
        let database = self.database.clone();
        let db =
            tokio::task::spawn_blocking(move || Db::open(&Options { busy_timeout: busy, ..test_options(&database) }))
                .await
                .unwrap()
                .expect("open the replica's db");
        let app = App::new(db, Tokens::new([TOKEN.to_owned()]));
        TestApp { app: Arc::new(app), engine: self.engine, database: self.database.clone(), _dir: self._dir.clone() }
    }

    /// Holds the write lock of the database from another connection (another process, another
    /// replica) until the returned guard is released.
    pub fn block_writes(&self) -> Blocker {
        Blocker::hold(self.engine, &self.database)
    }

    /// The first column of the first row of `sql` (`?` placeholders), read through the app's
    /// own database handle, as an integer.
    pub async fn sql_i64(&self, sql: &'static str, params: Vec<coursed::store::Value>) -> i64 {
        let v = self.app.db.read(move |tx| Ok(tx.first(sql, &params)?)).await.expect("query");
        v.and_then(|v| v.cell().as_i64()).unwrap_or(0)
    }

    /// A request with the token and JSON:API headers.
    pub fn req(&self, method: &str, path: &str) -> warp::test::RequestBuilder {
        warp::test::request()
            .method(method)
            .path(path)
            .header("host", "localhost:8080")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("accept", JSONAPI)
    }

    pub async fn send(&self, req: warp::test::RequestBuilder) -> Resp {
        let routes = coursed::http::routes(self.app.clone());
        let res = req.reply(&routes).await;
        let (parts, body) = res.into_parts();
        Resp { status: parts.status, body: parse_checked(&parts.headers, &body), headers: parts.headers }
    }

    /// The status and the body bytes exactly as sent.
    pub async fn raw(&self, path: &str) -> (u16, bytes::Bytes) {
        let routes = coursed::http::routes(self.app.clone());
        let res = self.req("GET", path).reply(&routes).await;
        (res.status().as_u16(), res.into_body())
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.req("GET", path)).await
    }

    pub async fn write(&self, method: &str, path: &str, body: Value) -> Resp {
        self.send(self.req(method, path).header("content-type", JSONAPI).body(body.to_string())).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(self.req("DELETE", path)).await
    }

    /// Creates a resource of `ty` with `attributes` (and `relationships`), asserting 201.
    pub async fn create(&self, ty: &str, attributes: Value, relationships: Value) -> String {
        let mut data = json!({"type": ty, "attributes": attributes});
        if !relationships.is_null() {
            data["relationships"] = relationships;
        }
        let r = self.write("POST", &format!("/v1/{ty}"), json!({ "data": data })).await;
        r.assert_status(201);
        r.id()
    }

    pub async fn module(&self, title: &str) -> String {
        self.create("modules", json!({ "title": title }), Value::Null).await
    }

    pub async fn subject(&self, title: &str, module: Option<&str>) -> String {
        let rels = match module {
            Some(m) => json!({"module": {"data": {"type": "modules", "id": m}}}),
            None => Value::Null,
        };
        self.create("subjects", json!({ "title": title }), rels).await
    }

    pub async fn chapter(&self, title: &str, subject: &str, position: i64) -> String {
        self.create(
            "chapters",
            json!({"title": title, "position": position}),
            json!({"subject": {"data": {"type": "subjects", "id": subject}}}),
        )
        .await
    }

    /// SQL statements run so far on this app's database.
    pub fn statements(&self) -> u64 {
        self.app.db.statements().expect("statement counting is on in tests")
    }
}

/// A to-one linkage value.
pub fn one(ty: &str, id: &str) -> Value {
    json!({"data": {"type": ty, "id": id}})
}

/// A to-many linkage value.
pub fn many(ty: &str, ids: &[&str]) -> Value {
    json!({"data": ids.iter().map(|id| json!({"type": ty, "id": id})).collect::<Vec<_>>()})
}

/// Parses a response body; a JSON:API body must be valid against the official schema.
pub fn parse_checked(headers: &HeaderMap, body: &Bytes) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    let doc: Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {body:?}"));
    if headers.get("content-type").is_some_and(|v| v == JSONAPI) {
        assert_valid_jsonapi(&doc);
    }
    doc
}

#[track_caller]
pub fn assert_valid_jsonapi(doc: &Value) {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    let v = VALIDATOR.get_or_init(|| {
        let schema: Value = serde_json::from_str(include_str!("../jsonapi-1.0.schema.json")).unwrap();
        jsonschema::validator_for(&schema).expect("the JSON:API schema compiles")
    });
    let errors: Vec<String> = v.iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path)).collect();
    assert!(errors.is_empty(), "response is not a valid JSON:API document: {errors:?}\n{doc}");
    assert_eq!(doc["jsonapi"], json!({"version": "1.0"}), "{doc}");
}

#[test]
fn the_schema_check_rejects_documents_that_are_not_json_api() {
    let bad = [
        json!({"jsonapi": {"version": "1.0"}}),
        json!({"jsonapi": {"version": "1.0"}, "data": {"type": "subjects", "id": 5}}),
        json!({"jsonapi": {"version": "1.0"}, "data": [], "errors": []}),
        json!({"jsonapi": {"version": "1.0"}, "errors": [{"status": 404}]}),
        json!({"jsonapi": {"version": "1.0"}, "data": {"type": "subjects", "id": "1", "attributes": {"id": 1}}}),
    ];
    for doc in bad {
        let caught = std::panic::catch_unwind(|| assert_valid_jsonapi(&doc));
        assert!(caught.is_err(), "accepted an invalid document: {doc}");
    }
    assert_valid_jsonapi(&json!({"jsonapi": {"version": "1.0"}, "data": null}));
}

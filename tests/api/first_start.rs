//! What a newcomer meets: `coursed serve` prints a first request that works as printed (and
//! later says where the generated token is kept, never showing it again), warns of weak tokens
//! without showing them, and the commands that manage a server's database refuse to create a
//! new one beside it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::helpers::assert_valid_jsonapi;
use crate::process::{db_path, Server};

/// The words of the printed `curl` command as a shell hands them to curl, run in `cwd`.
fn curl_words(server: &Server, cwd: &Path) -> Vec<String> {
    let line = server.preamble.iter().find(|l| l.starts_with("first request: ")).expect("a first request printed");
    let command = line.strip_prefix("first request: curl ").unwrap_or_else(|| panic!("not a curl command: {line}"));
    let out = Command::new("sh").arg("-c").arg(format!("printf '%s\\n' {command}")).current_dir(cwd).output().unwrap();
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

/// Makes the request the server printed, from the folder `cwd`; its status.
pub(crate) fn first_request(server: &Server, cwd: &Path) -> u16 {
    let words = curl_words(server, cwd);
    assert_eq!(words.len(), 3, "{words:?}");
    assert_eq!(words[0], "-H");
    let token = words[1].strip_prefix("Authorization: Bearer ").unwrap_or_else(|| panic!("{words:?}"));
    let path = words[2].strip_prefix(&format!("http://{}", server.addr)).expect("the server's own address");
    let (status, body) = server.call("GET", path, token, None);
    assert_valid_jsonapi(&body);
    status
}

/// The log lines of `server` containing `text`, gathered for up to `limit`, until one comes.
pub(crate) fn logged(server: &Server, text: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let stderr = server.stderr.lock().unwrap();
    let mut found = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match stderr.recv_timeout(left) {
            Ok(line) if line.contains(text) => found.push(line),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    found
}

#[test]
fn the_first_start_prints_a_request_that_works_and_later_starts_say_where_the_token_is() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_path(dir.path());
    let kept = format!("{db}.tokens");
    let server = Server::start(&["--database", &db]);
    assert!(server.preamble[0].contains(&format!("kept in {kept}")), "{:?}", server.preamble);
    let token = server.preamble[1].clone();
    assert!(server.preamble[2].contains(&format!("'Authorization: Bearer {token}'")), "{:?}", server.preamble);
    assert_eq!(first_request(&server, Path::new("/")), 200);
    drop(server);

    let server = Server::start(&["--database", &db]);
    let said = server.preamble.join("\n");
    assert!(!said.contains(&token), "the token is printed only by the start that made it: {said}");
    assert!(said.contains(&format!("the token generated at the first start is kept in {kept}")), "{said}");
    // From any folder: the file is named in full.
    assert_eq!(first_request(&server, Path::new("/")), 200);
}

#[test]
fn a_tokens_file_gives_the_first_request_its_token_and_weak_tokens_are_named_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("it's tokens");
    let strong = "9f3c1a7be41d08c65a9e7f1b2c3d4e5f60718293a4b5c6d7";
    let placeholder = "replace-me-with-a-long-random-token";
    std::fs::write(&file, format!("# the school's tokens\n\n  {strong}  # the display\n{placeholder}\n")).unwrap();
    let file = file.to_str().unwrap();
    let server = Server::start(&[
        "--database",
        ":memory:",
        "--tokens-file",
        file,
        "--token",
        "changeme",
        "--token",
        "A1b2C3",
        "--token",
        &"e7".repeat(20),
        "--token",
        "4b8e2f9a1c7d3e6f0a5b9c2d8e1f4a7b",
    ]);
    assert_eq!(first_request(&server, dir.path()), 200);
    let weak = logged(&server, "is weak", Duration::from_secs(3));
    let weak = weak.join("\n");
    for (place, why) in [
        ("the 1st token given with --token or COURSED_TOKENS", "placeholder"),
        ("the 2nd token given with --token or COURSED_TOKENS", "shorter than 32"),
        ("the 3rd token given with --token or COURSED_TOKENS", "repeats"),
        (&format!("the token on line 4 of {file}"), "placeholder"),
    ] {
        let line = weak.lines().find(|l| l.contains(place)).unwrap_or_else(|| panic!("{place} in:\n{weak}"));
        assert!(line.contains("[WARN]") && line.contains(why), "{line}");
        assert!(line.contains("openssl rand -hex 32") && line.contains("coursed token create"), "{line}");
    }
    assert_eq!(weak.lines().count(), 4, "the strong tokens are not named:\n{weak}");
    for secret in ["changeme", "A1b2C3", "e7e7", placeholder, strong] {
        assert!(!weak.contains(secret), "{secret} shown in:\n{weak}");
    }
    // Tokens given on the command line cannot be read back: the request says which to use.
    let flags_only = Server::start(&["--database", ":memory:", "--token", "4b8e2f9a1c7d3e6f0a5b9c2d8e1f4a7b"]);
    let said = flags_only.preamble.join("\n");
    assert!(said.contains("$TOKEN") && said.contains("--token or COURSED_TOKENS"), "{said}");
    assert!(!said.contains("4b8e2f9a"), "{said}");
}

#[test]
fn commands_that_manage_a_database_refuse_to_create_one_and_name_the_file_they_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("COURSED_DATABASE")
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let default = dir.path().join("coursed.db");
    for args in [
        &["token", "create", "--name", "teacher"][..],
        &["token", "list"],
        &["token", "revoke", "teacher"],
        &["webhook", "add", "--url", "http://127.0.0.1:9/hook"],
        &["webhook", "list"],
        &["webhook", "remove", "0190"],
        &["history", "prune", "--before", "2026-01-01"],
        &["follow", "--forget"],
        &["export", "--output", "out.bundle"],
        &["backup", "--output", "b.db"],
    ] {
        let (ok, err) = run(args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(&format!("there is no database at {}", default.display())), "{args:?}: {err}");
        assert!(err.contains("--database or COURSED_DATABASE"), "{args:?}: {err}");
        assert!(!default.exists(), "{args:?} created {}", default.display());
    }
    let named = dir.path().join("typo.db");
    let (ok, err) = run(&["token", "create", "--name", "t", "--database", named.to_str().unwrap()]);
    assert!(!ok && err.contains(&named.display().to_string()), "{err}");
    assert!(!named.exists());
    // Unless asked to: a first token made before the first start (a package's installation).
    let asked = dir.path().join("asked.db");
    let (ok, err) =
        run(&["token", "create", "--name", "t", "--create-database", "--database", asked.to_str().unwrap()]);
    assert!(ok && asked.exists(), "{err}");
    // Once the server made its database, the same command works on it.
    drop(Server::start(&["--database", default.to_str().unwrap(), "--token", "4b8e2f9a1c7d3e6f0a5b9c2d8e1f4a7b"]));
    let (ok, err) = run(&["token", "create", "--name", "teacher"]);
    assert!(ok, "{err}");
}

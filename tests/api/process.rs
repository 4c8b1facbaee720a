//! The real binary as a child process: started on port 0, waited for by its readiness line,
//! called over plain HTTP/1.1, signalled, and killed when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `coursed serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: String,
    /// Whether it serves HTTPS (its readiness line says so).
    pub https: bool,
    /// Lines printed on stdout before the readiness line.
    pub preamble: Vec<String>,
    /// Its log (stderr), line by line.
    pub stderr: std::sync::Mutex<mpsc::Receiver<String>>,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        Server::try_start(args).unwrap_or_else(|e| panic!("coursed did not start: {e}"))
    }

    pub fn try_start(args: &[&str]) -> Result<Server, String> {
        Starting::spawn(args).ready()
    }

    /// One request over a fresh connection; returns the status and the parsed body.
    pub fn call(&self, method: &str, path: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, body) =
            exchange(&self.addr, method, path, token, crate::helpers::JSONAPI, body).expect("a full response");
        let body = if body.is_empty() { Value::Null } else { serde_json::from_str(&body).expect("JSON body") };
        (status, body)
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap().success();
        assert!(ok, "kill {sig}");
    }

    /// Waits for the process to exit, killing it after `limit`.
    pub fn wait(mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("coursed did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One request that may fail (the server may be down, or killed while answering): the status
/// and the body (`Null` unless JSON), or `None`.
pub fn try_call(addr: &str, method: &str, path: &str, token: &str, body: Option<&Value>) -> Option<(u16, Value)> {
    try_call_as(addr, method, path, token, crate::helpers::JSONAPI, body)
}

/// [`try_call`] with another media type (sent as `Content-Type` and `Accept`), e.g. the
/// Atomic Operations extension's.
pub fn try_call_as(
    addr: &str,
    method: &str,
    path: &str,
    token: &str,
    media_type: &str,
    body: Option<&Value>,
) -> Option<(u16, Value)> {
    let (status, body) = exchange(addr, method, path, token, media_type, body).ok()?;
    Some((status, serde_json::from_str(&body).unwrap_or(Value::Null)))
}

/// One request over a fresh HTTP/1.1 connection: the status and the body's text.
fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    token: &str,
    media_type: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: {media_type}\r\n\
         Content-Type: {media_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let text = String::from_utf8(raw).map_err(|_| bad("a response that is not UTF-8"))?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| bad("a response cut short"))?;
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| bad("no status code"))?;
    Ok((status, body.to_owned()))
}

/// A `coursed serve` started and not yet known to be ready; its output read line by line.
pub struct Starting {
    child: Child,
    stdout: mpsc::Receiver<String>,
    pub stderr: mpsc::Receiver<String>,
}

impl Starting {
    /// Starts `coursed serve` with `args`, at log level `warn` unless they say otherwise.
    pub fn spawn(args: &[&str]) -> Starting {
        Starting::spawn_with(args, &[])
    }

    /// [`Starting::spawn`], with these environment variables set.
    pub fn spawn_with(args: &[&str], env: &[(&str, &str)]) -> Starting {
        let quiet: &[&str] = if args.contains(&"--log-level") { &[] } else { &["--log-level", "warn"] };
        let mut child = Command::new(env!("CARGO_BIN_EXE_coursed"))
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .args(quiet)
            .args(args)
            .env_remove("COURSED_TOKENS")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn coursed");
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        Starting { child, stdout, stderr }
    }

    /// Waits for the readiness line; the lines printed before it are the preamble.
    pub fn ready(mut self) -> Result<Server, String> {
        let mut preamble = Vec::new();
        loop {
            match self.stdout.recv_timeout(START_TIMEOUT) {
                Ok(line) => match line
                    .strip_prefix("listening on http://")
                    .map(|r| (r, false))
                    .or_else(|| line.strip_prefix("listening on https://").map(|r| (r, true)))
                {
                    Some((rest, https)) => {
                        let addr = rest.strip_suffix("/v1").expect("readiness line ends in /v1").to_owned();
                        return Ok(Server {
                            child: self.child,
                            addr,
                            https,
                            preamble,
                            stderr: std::sync::Mutex::new(self.stderr),
                        });
                    }
                    None => preamble.push(line),
                },
                Err(_) => {
                    let _ = self.child.kill();
                    let status = self.child.wait().ok();
                    // What it said before it ended (the reader sees the pipe close soon after).
                    let err: Vec<String> =
                        std::iter::from_fn(|| self.stderr.recv_timeout(Duration::from_secs(2)).ok()).collect();
                    return Err(format!("no readiness line; status {status:?}, stderr: {}", err.join("\n")));
                }
            }
        }
    }

    /// Waits until stderr prints a line containing `text`.
    pub fn wait_for_stderr(&self, text: &str) -> String {
        loop {
            match self.stderr.recv_timeout(START_TIMEOUT) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(e) => panic!("coursed never printed {text:?} on stderr: {e}"),
            }
        }
    }
}

/// The lines of `from`, as they come.
fn lines(from: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates `per_worker` subjects from each of `workers` threads at once, worker `w` through
/// `servers[w % servers.len()]`, each acknowledged with 201; returns their ids.
pub fn create_concurrently(servers: &[&Server], token: &str, workers: usize, per_worker: usize) -> Vec<String> {
    std::thread::scope(|scope| {
        let running: Vec<_> = (0..workers)
            .map(|w| {
                let target = servers[w % servers.len()];
                scope.spawn(move || {
                    (0..per_worker)
                        .map(|i| {
                            let (status, body) =
                                target.call("POST", "/v1/subjects", token, Some(&new_subject(&format!("w{w} n{i}"))));
                            assert_eq!(status, 201, "{body}");
                            body["data"]["id"].as_str().unwrap().to_owned()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        running.into_iter().flat_map(|w| w.join().unwrap()).collect()
    })
}

pub fn db_path(dir: &Path) -> String {
    dir.join("course.db").to_str().unwrap().to_owned()
}

pub fn new_subject(title: &str) -> Value {
    json!({"data": {"type": "subjects", "attributes": {"title": title, "content": "x".repeat(2000)}}})
}

/// A TCP relay in front of a server (a district): an address that stays the same while the
/// server behind it is killed and started again on another port (a school's upstream), and which cuts
/// every connection (and refuses new ones) while `cut` is set: a lost network.
pub struct Relay {
    pub port: u16,
    to: Arc<Mutex<String>>,
    pub cut: Arc<AtomicBool>,
    /// Bumped to close every connection open.
    epoch: Arc<std::sync::atomic::AtomicUsize>,
}

impl Relay {
    pub fn start(to: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let relay = Relay { port, to: Arc::new(Mutex::new(to.to_owned())), cut: Arc::default(), epoch: Arc::default() };
        let (to, cut, epoch) = (relay.to.clone(), relay.cut.clone(), relay.epoch.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                if cut.load(Ordering::SeqCst) {
                    continue;
                }
                let target = to.lock().unwrap().clone();
                let Ok(server) = TcpStream::connect(&target) else { continue };
                let mine = epoch.load(Ordering::SeqCst);
                for (mut from, mut into) in
                    [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    let (cut, epoch) = (cut.clone(), epoch.clone());
                    from.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 << 10];
                        loop {
                            if cut.load(Ordering::SeqCst) || epoch.load(Ordering::SeqCst) != mine {
                                break;
                            }
                            match from.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if into.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => break,
                            }
                        }
                        let _ = from.shutdown(std::net::Shutdown::Both);
                        let _ = into.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        relay
    }

    /// Sends what comes next to `to`, closing what is open.
    pub fn point_to(&self, to: &str) {
        *self.to.lock().unwrap() = to.to_owned();
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

//! A synchronous client over tokio-postgres, for the blocking threads the engine runs on: each
//! connection has a small runtime of its own that drives the socket only while a call waits.
//!
//! Unlike a plain synchronous client it can hold a statement back ([`PgConn::defer`]) and send
//! it together with the next one: a transaction's `BEGIN` travels with its first statement, one
//! round trip instead of two.

use std::collections::HashMap;
use std::future::Future;
use std::pin::{pin, Pin};
use std::task::Poll;

use futures_util::{Stream, TryStreamExt};
use tokio_postgres::types::{BorrowToSql, ToSql};
use tokio_postgres::{AsyncMessage, Client, Config, Error, Row, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

type Messages = Pin<Box<dyn Stream<Item = Result<AsyncMessage, Error>> + Send>>;

/// One connection to PostgreSQL, with the statements prepared on it.
pub struct PgConn {
    runtime: tokio::runtime::Runtime,
    client: Client,
    messages: Messages,
    /// The server closed the connection (or it failed): every later call fails.
    closed: bool,
    /// Statements to send with the next one (`;`-separated; empty for none).
    deferred: String,
    /// A write context to send with the next statement (see [`PgConn::ride`]): apart from
    /// `deferred`, whose being unsent says that no statement of the unit of work went out.
    riding: String,
    /// The write context the session holds (see [`crate::store::WriteContext`]), or is about to
    /// once what is deferred is sent.
    pub context: Option<crate::store::WriteContext>,
    /// Prepared statements, keyed by their `?` form.
    pub statements: HashMap<String, Statement>,
    /// The connection failed in a way that leaves it unusable (set by the transaction).
    pub broken: bool,
}

impl PgConn {
    pub fn connect(config: &Config, tls: MakeRustlsConnect) -> Result<PgConn, ConnectError> {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ConnectError::Runtime)?;
        let (client, mut connection) = runtime.block_on(config.connect(tls)).map_err(ConnectError::Pg)?;
        let messages: Messages = Box::pin(futures_util::stream::poll_fn(move |cx| connection.poll_message(cx)));
        Ok(PgConn {
            runtime,
            client,
            messages,
            closed: false,
            deferred: String::new(),
            riding: String::new(),
            context: None,
            statements: HashMap::new(),
            broken: false,
        })
    }

    pub fn is_closed(&self) -> bool {
        self.closed || self.client.is_closed()
    }

    /// Reads what the server sent meanwhile (a notice that it is shutting down, the end of the
    /// connection) without waiting; `false` when the connection is gone.
    pub fn alive(&mut self) -> bool {
        let _ = drive(&self.runtime, &mut self.messages, &mut self.closed, std::future::ready(Ok(())));
        !self.is_closed()
    }

    /// Holds `sql` (no parameters, no rows) back, to be sent with the next statement, after
    /// any held back before it.
    pub fn defer(&mut self, sql: &str) {
        if !self.deferred.is_empty() {
            self.deferred.push_str("; ");
        }
        self.deferred.push_str(sql);
    }

    /// Holds `sql` (a write context's `set_config`) back to go with the next statement, after
    /// what [`PgConn::defer`] holds; it replaces a context held back before it.
    pub fn ride(&mut self, sql: String) {
        self.riding = sql;
    }

    /// Drops the held-back statements; `true` if what [`PgConn::defer`] held was among them
    /// (a transaction's `BEGIN`: then no statement of it reached the server). A context held
    /// back is dropped too, and forgotten.
    pub fn cancel_deferred(&mut self) -> bool {
        if !std::mem::take(&mut self.riding).is_empty() {
            self.context = None;
        }
        !std::mem::take(&mut self.deferred).is_empty()
    }

    fn take_deferred(&mut self) -> Option<String> {
        let (deferred, riding) = (std::mem::take(&mut self.deferred), std::mem::take(&mut self.riding));
        match (deferred.is_empty(), riding.is_empty()) {
            (true, true) => None,
            (false, true) => Some(deferred),
            (true, false) => Some(riding),
            (false, false) => Some(format!("{deferred}; {riding}")),
        }
    }

    /// Runs statements without parameters or rows (and a held-back one first).
    pub fn batch(&mut self, sql: &str) -> Result<(), Error> {
        let deferred = self.take_deferred();
        let client = &self.client;
        let work = async {
            if let Some(first) = deferred {
                client.batch_execute(&first).await?;
            }
            client.batch_execute(sql).await
        };
        drive(&self.runtime, &mut self.messages, &mut self.closed, work)
    }

    pub fn prepare(&mut self, sql: &str) -> Result<Statement, Error> {
        let client = &self.client;
        drive(&self.runtime, &mut self.messages, &mut self.closed, client.prepare(sql))
    }

    /// Runs `st` and calls `each` with its rows as they arrive; returns how many there were.
    pub fn query<P: BorrowToSql>(
        &mut self,
        st: &Statement,
        params: impl ExactSizeIterator<Item = P>,
        each: &mut dyn FnMut(&Row),
    ) -> Result<u64, Error> {
        let deferred = self.take_deferred();
        let client = &self.client;
        let work = async {
            let (first, rows) = futures_util::join!(held(client, deferred), client.query_raw(st, params));
            first?;
            let mut rows = pin!(rows?);
            let mut n = 0;
            while let Some(row) = rows.try_next().await? {
                each(&row);
                n += 1;
            }
            Ok(n)
        };
        drive(&self.runtime, &mut self.messages, &mut self.closed, work)
    }

    /// Runs `st`; returns the number of rows it changed.
    pub fn execute<P: BorrowToSql>(
        &mut self,
        st: &Statement,
        params: impl ExactSizeIterator<Item = P>,
    ) -> Result<u64, Error> {
        let deferred = self.take_deferred();
        let client = &self.client;
        let work = async {
            let (first, changed) = futures_util::join!(held(client, deferred), client.execute_raw(st, params));
            first?;
            changed
        };
        drive(&self.runtime, &mut self.messages, &mut self.closed, work)
    }

    /// The rows of `sql` with `params` (prepared for this call only; for set-up, not requests).
    pub fn rows(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, Error> {
        let client = &self.client;
        drive(&self.runtime, &mut self.messages, &mut self.closed, client.query(sql, params))
    }
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub enum ConnectError {
    Pg(Error),
    /// No runtime for the connection (out of file descriptors, say).
    Runtime(std::io::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The client's own message leaves out the cause ("error connecting to server").
            ConnectError::Pg(e) => match (e.as_db_error(), std::error::Error::source(e)) {
                (Some(db), _) => f.write_str(db.message()),
                (None, Some(cause)) => write!(f, "{e}: {cause}"),
                (None, None) => write!(f, "{e}"),
            },
            ConnectError::Runtime(e) => write!(f, "cannot start the connection's runtime: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {}

impl ConnectError {
    /// Whether waiting may help: the server is not listening yet, is starting up, or is full.
    /// A refused password or TLS handshake, or a missing database, will not change.
    pub fn is_transient(&self) -> bool {
        match self {
            ConnectError::Pg(e) => match e.as_db_error() {
                Some(d) => ["08", "53", "57"].contains(&&d.code().code()[..2]),
                None => std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()),
            },
            ConnectError::Runtime(_) => false,
        }
    }
}

/// The held-back statement, if any; sent on the first poll, before what it is joined with.
async fn held(client: &Client, deferred: Option<String>) -> Result<(), Error> {
    match deferred {
        Some(sql) => client.batch_execute(&sql).await,
        None => Ok(()),
    }
}

/// Runs `work` to completion on the connection's runtime, driving the socket meanwhile.
fn drive<T>(
    runtime: &tokio::runtime::Runtime,
    messages: &mut Messages,
    closed: &mut bool,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let mut work = pin!(work);
    runtime.block_on(std::future::poll_fn(|cx| {
        while !*closed {
            match messages.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(AsyncMessage::Notice(notice)))) => {
                    log::debug!("PostgreSQL notice: {}", notice.message());
                }
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(e))) => {
                    *closed = true;
                    return Poll::Ready(Err(e));
                }
                Poll::Ready(None) => *closed = true,
                Poll::Pending => break,
            }
        }
        work.as_mut().poll(cx)
    }))
}

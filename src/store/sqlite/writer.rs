//! The writer thread: group commit, one savepoint per write.

use std::collections::VecDeque;
use std::sync::mpsc;

use rusqlite::{Connection, TransactionBehavior};

use super::tx::{db_error, SqliteTx};
use super::{Deliver, Job};
use crate::error::Error;
use crate::store::tx::Shared;

/// The most writes committed together.
const MAX_GROUP: usize = 512;

/// The writer thread: group commit, one savepoint per write.
pub fn write_loop(mut conn: Connection, shared: &Shared, queue: mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut group = VecDeque::from([first]);
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push_back(job),
                Err(_) => break,
            }
        }
        let mut delivers = Vec::with_capacity(group.len());
        let (size, started) = (group.len(), std::time::Instant::now());
        let committed = run_group(&mut conn, shared, &mut group, &mut delivers).map_err(|e| Error::from(db_error(e)));
        log::trace!("committed a group of {size} writes in {} µs", started.elapsed().as_micros());
        // Writes left unrun because the group failed get the group's error.
        delivers.extend(group.into_iter().map(|job| job(None).1));
        for deliver in delivers {
            deliver(committed.clone());
        }
    }
    log::debug!("writer stopped");
}

/// Runs the queued writes in one transaction; an `Err` means nothing of the group was kept.
fn run_group(
    conn: &mut Connection,
    shared: &Shared,
    group: &mut VecDeque<Job>,
    delivers: &mut Vec<Deliver>,
) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let started = std::time::Instant::now();
    // Prepared once per connection, unlike rusqlite's `Savepoint`, which parses each time.
    let run = |sql: &str| tx.prepare_cached(sql).and_then(|mut st| st.execute([])).map(drop);
    while !group.is_empty() {
        run("SAVEPOINT write")?;
        let Some(job) = group.pop_front() else { break };
        let (ok, deliver) = job(Some(&mut SqliteTx { conn: &tx, shared }));
        delivers.push(deliver);
        if !ok {
            run("ROLLBACK TO write")?;
        }
        run("RELEASE write")?;
    }
    log::trace!("ran {} writes in {} µs", delivers.len(), started.elapsed().as_micros());
    tx.commit()
}

//! The writer's search indexing: a group's changes reach the FTS5 indexes at the end of the
//! group, in one statement per index, instead of one by one as the schema's triggers write them.
//!
//! FTS5 writes its pending entries out as a new segment at every statement that opens a
//! statement journal (an insert with triggers and a foreign key does: `xSavepoint` flushes), so
//! with the triggers each create of a group became a segment of its own, merged again later.
//! The writer's connection instead turns the database's own triggers off
//! (`SQLITE_DBCONFIG_ENABLE_TRIGGER`, which leaves TEMP triggers on) and runs, as TEMP triggers,
//!
//! - a copy of every trigger of the schema but the index triggers (the row counts and anything
//!   a later migration adds, read from the file itself, so there is one text of each), and
//! - for each indexed table, triggers that note which rows a write touched, with the words the
//!   index holds for them (a row's words before its first change in the group), in a TEMP
//!   table: `{table}_touched`.
//!
//! Before the group commits, [`GroupIndexing::flush`] takes the touched rows' old words out of
//! the indexes and puts the current words of those that still exist in, then empties the notes.
//! A write rolled back to its savepoint takes its notes with it. Other connections (a bulk load,
//! the `sqlite3` shell, another coursed on the same file) keep the schema's triggers, which
//! index every write at once, as before.
//!
//! The copies are taken when the writer starts: a trigger that another program adds, drops or
//! changes later reaches this writer at its next start. The index triggers are known by their
//! names (`{table}_search_{insert,delete,update}`); a migration that replaces them must keep
//! those names or change [`index_trigger`].

use rusqlite::config::DbConfig;
use rusqlite::Connection;

use crate::resources::TYPES;

/// The statements that bring the indexes of one table up to date with its notes.
struct Table {
    /// Is anything noted? (one indexed lookup; most groups touch one table)
    any: String,
    /// Old words out, current words in, notes cleared.
    flush: Vec<String>,
}

/// The indexing of a writer's groups; see the module's documentation.
pub struct GroupIndexing {
    tables: Vec<Table>,
}

/// The name of the schema trigger that indexes `table` on `op` (migrations/sqlite/0003).
fn index_trigger(table: &str, op: &str) -> String {
    format!("{table}_search_{op}")
}

impl GroupIndexing {
    /// Sets up `conn` (the writer's connection, migrated) to index at the end of each group.
    /// On an error the connection is left as it was: the schema's triggers index each write.
    pub fn install(conn: &Connection) -> Result<GroupIndexing, String> {
        conn.execute_batch("SAVEPOINT indexing").map_err(|e| e.to_string())?;
        let installed = Self::install_in(conn)
            .and_then(|indexing| conn.execute_batch("RELEASE indexing").map(|()| indexing).map_err(|e| e.to_string()));
        if installed.is_err() {
            // Whatever was made goes (TEMP objects are part of the transaction); the schema's
            // triggers are on again.
            if conn.execute_batch("ROLLBACK TO indexing; RELEASE indexing").is_err() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            let _ = conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, true);
        }
        installed
    }

    fn install_in(conn: &Connection) -> Result<GroupIndexing, String> {
        let sql = |e: rusqlite::Error| e.to_string();
        let mut st = conn
            .prepare("SELECT name, sql FROM main.sqlite_master WHERE type = 'trigger' ORDER BY name")
            .map_err(sql)?;
        let triggers: Vec<(String, String)> =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).and_then(Iterator::collect).map_err(sql)?;
        let mut indexed = Vec::new();
        let mut tables = Vec::new();
        for rt in TYPES {
            // A table is indexed here only where the schema indexes it (a database whose index
            // was dropped keeps what is left of its triggers, copied below).
            let replaced = ["insert", "delete", "update"].map(|op| index_trigger(rt.table, op));
            if !replaced.iter().all(|name| triggers.iter().any(|(n, _)| n == name)) {
                continue;
            }
            let words: Vec<&str> = crate::search::columns(rt).map(|(_, how)| how.column).collect();
            let Some(title) = crate::search::columns(rt).find(|(a, _)| a.name == "title").map(|(_, how)| how.column)
            else {
                continue;
            };
            let t = rt.table;
            indexed.extend(replaced);
            // Each words column through `each`, joined by `by`.
            let list =
                |each: &dyn Fn(&str) -> String, by: &str| words.iter().map(|c| each(c)).collect::<Vec<_>>().join(by);
            let cols = words.join(", ");
            let old = list(&|c| format!("OLD.{c}"), ", ");
            let changed = list(&|c| format!("OLD.{c} IS NOT NEW.{c}"), " OR ");
            let touched = format!("temp.{t}_touched");
            // `existed`: the row was indexed before the group (its old words are here). The
            // first note of a row wins: what the index holds is the row as the group found it.
            // Written with `WHERE NOT EXISTS`, not `OR IGNORE`: a trigger's statement takes the
            // conflict clause of the statement that fired it (`UPDATE OR REPLACE`, an upsert).
            // An update notes its new rowid too, should a statement ever move a row.
            let first = |rid: &str| format!("WHERE NOT EXISTS (SELECT 1 FROM {touched} WHERE rid = {rid})");
            let (old_first, new_first) = (first("OLD.rowid"), first("NEW.rowid"));
            conn.execute_batch(&format!(
                "CREATE TEMP TABLE {t}_touched (rid INTEGER PRIMARY KEY, existed INTEGER NOT NULL, {cols});
                 CREATE TEMP TRIGGER {t}_touched_insert AFTER INSERT ON main.{t} BEGIN
                     INSERT INTO {touched} (rid, existed) SELECT NEW.rowid, 0 {new_first};
                 END;
                 CREATE TEMP TRIGGER {t}_touched_delete AFTER DELETE ON main.{t} BEGIN
                     INSERT INTO {touched} (rid, existed, {cols}) SELECT OLD.rowid, 1, {old} {old_first};
                 END;
                 CREATE TEMP TRIGGER {t}_touched_update AFTER UPDATE OF {cols} ON main.{t} WHEN {changed} BEGIN
                     INSERT INTO {touched} (rid, existed, {cols}) SELECT OLD.rowid, 1, {old} {old_first};
                     INSERT INTO {touched} (rid, existed) SELECT NEW.rowid, 0 {new_first};
                 END;"
            ))
            .map_err(sql)?;
            // For each noted row (`n`, in rowid order), its old words out (`k` 0, if it was
            // indexed) and its current words in (`k` 1, if it still exists: `r`). CROSS JOIN
            // keeps the notes as the outer loop (a few rows, each looked up by rowid); without
            // statistics on the TEMP table the planner may scan the whole table instead.
            let pick = |c: &str| format!("CASE k.k WHEN 0 THEN n.{c} ELSE r.{c} END");
            let both = |words: &str| {
                format!(
                    "SELECT CASE k.k WHEN 0 THEN 'delete' END, n.rid, {words}
                     FROM {touched} AS n CROSS JOIN (SELECT 0 AS k UNION ALL SELECT 1) AS k
                     LEFT JOIN main.{t} AS r ON k.k = 1 AND r.rowid = n.rid
                     WHERE CASE k.k WHEN 0 THEN n.existed ELSE r.rowid IS NOT NULL END
                     ORDER BY n.rid, k.k"
                )
            };
            tables.push(Table {
                any: format!("SELECT EXISTS (SELECT 1 FROM {touched})"),
                // One statement per index, each row's deletion (the command column 'delete')
                // before its insertion (the command column NULL), rows in rowid order: FTS5
                // writes what it holds pending as a segment of its own when the next statement
                // begins and whenever a rowid goes down (a deletion followed by an insertion of
                // the same rowid does not count), and each segment is merged again later.
                flush: vec![
                    format!("INSERT INTO {t}_search ({t}_search, rowid, {cols}) {}", both(&list(&pick, ", "))),
                    format!("INSERT INTO {t}_titles ({t}_titles, rowid, {title}) {}", both(&pick(title))),
                    format!("DELETE FROM {touched}"),
                ],
            });
        }
        // Prepared once here, so that an index the schema lacks makes the writer keep the
        // schema's triggers rather than fail the first group that touches its table.
        for t in &tables {
            for statement in std::iter::once(&t.any).chain(&t.flush) {
                conn.prepare_cached(statement).map_err(sql)?;
            }
        }
        // Who writes, for the history triggers' copies (which read TEMP tables first): the
        // writer says so before each change of caller, without writing to the file.
        conn.execute_batch(
            "CREATE TEMP TABLE history_context (id INTEGER PRIMARY KEY, actor TEXT NOT NULL, action TEXT,
                                                recording INTEGER NOT NULL);
             INSERT INTO temp.history_context VALUES (1, 'coursed', NULL, 1);",
        )
        .map_err(sql)?;
        // Every other trigger of the schema, as a TEMP copy of its own text.
        for (name, text) in triggers.iter().filter(|(name, _)| !indexed.contains(name)) {
            let Some(rest) = text.strip_prefix("CREATE TRIGGER ") else {
                return Err(format!("trigger {name} is not in the expected form"));
            };
            conn.execute_batch(&format!("CREATE TEMP TRIGGER {rest}")).map_err(sql)?;
        }
        // The setting as it is after the call: still on means it could not be turned off.
        if conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false).map_err(sql)? {
            return Err("the schema's triggers could not be turned off".into());
        }
        Ok(GroupIndexing { tables })
    }

    /// Brings the indexes up to date with the rows the group touched (in its transaction,
    /// after its last write).
    pub fn flush(&self, conn: &Connection) -> rusqlite::Result<()> {
        for t in &self.tables {
            let any: bool = conn.prepare_cached(&t.any)?.query_row([], |r| r.get(0))?;
            if any {
                for sql in &t.flush {
                    conn.prepare_cached(sql)?.execute([])?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::GroupIndexing;
    use rusqlite::Connection;

    /// A migrated database and a writer's connection to it with group indexing installed.
    fn writer(dir: &tempfile::TempDir) -> (Connection, GroupIndexing, String) {
        let path = dir.path().join("w.db").to_str().unwrap().to_owned();
        crate::store::sqlite::open::create(&path).unwrap();
        let conn = Connection::open(&path).unwrap();
        let indexing = GroupIndexing::install(&conn).unwrap();
        (conn, indexing, path)
    }

    fn subject(conn: &Connection, id: &str, title: &str) {
        conn.execute(
            "INSERT INTO subjects (id, title, title_words, created_at, updated_at) VALUES (?1, ?2, lower(?2), 'x', 'x')",
            [id, title],
        )
        .unwrap();
    }

    /// FTS5's own check of each index against its table (an error when they differ).
    fn check(path: &str) {
        let other = Connection::open(path).unwrap();
        for index in ["subjects_search", "subjects_titles"] {
            other.execute_batch(&format!("INSERT INTO {index} ({index}, rank) VALUES ('integrity-check', 1)")).unwrap();
        }
    }

    /// The notes hold a row's first state in the group whatever conflict clause the writing
    /// statement carries (a trigger's statements take it over), and follow a row that moves.
    #[test]
    fn notes_keep_the_indexed_words_under_any_conflict_clause() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, indexing, path) = writer(&dir);
        subject(&conn, "a", "Alpha");
        subject(&conn, "b", "Beta");
        subject(&conn, "e", "Echo");
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        indexing.flush(&conn).unwrap();
        conn.execute_batch("COMMIT").unwrap();
        check(&path);
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        // Inserted, then rewritten with OR REPLACE: never in the index before the flush.
        subject(&conn, "c", "Gamma");
        conn.execute_batch("UPDATE OR REPLACE subjects SET title = 'Delta', title_words = 'delta' WHERE id = 'c'")
            .unwrap();
        // Changed, then changed again by an upsert's update.
        conn.execute_batch("UPDATE subjects SET title = 'Alpha two', title_words = 'alpha two' WHERE id = 'a'")
            .unwrap();
        conn.execute_batch(
            "INSERT INTO subjects (id, title, title_words, created_at, updated_at) VALUES ('a', 'A3', 'a3', 'x', 'x')
             ON CONFLICT (id) DO UPDATE SET title = excluded.title, title_words = excluded.title_words",
        )
        .unwrap();
        // Renamed keeping a word: its deletion must reach the index before its insertion.
        conn.execute_batch("UPDATE subjects SET title = 'Echo two', title_words = 'echo two' WHERE id = 'e'").unwrap();
        // Moved to another rowid along with its words.
        conn.execute_batch("UPDATE subjects SET rowid = rowid + 1000, title_words = 'moved' WHERE id = 'b'").unwrap();
        indexing.flush(&conn).unwrap();
        conn.execute_batch("COMMIT").unwrap();
        check(&path);
        let found = |word: &str| -> i64 {
            conn.query_row("SELECT count(*) FROM subjects_search WHERE subjects_search MATCH ?1", [word], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(
            (found("delta"), found("gamma"), found("a3"), found("alpha"), found("moved"), found("beta")),
            (1, 0, 1, 0, 1, 0)
        );
        assert_eq!((found("echo"), found("two")), (1, 1));
    }
}
